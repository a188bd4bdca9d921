// localmem's hooks for OpenCode, written by `localmem hooks install --client opencode`
// (`localmem hooks uninstall --client opencode` removes this file; write it again to change it).
//
// Each hook runs localmem's hook command (HOOKS below: absolute paths, one store) with a JSON
// payload on stdin: {sessionID, directory, prompt?, database?}. What it does (checked with
// opencode-ai 1.18.33; localmem/hooks/opencode.py says where each fact comes from):
// - a session's first main-turn model request runs `session-start` once; a prompt
//   (`chat.message`) runs `prompt` after it. Their replies ({"additionalContext": ...}) go into
//   the system prompt of every main-turn request of that session from then on: OpenCode builds
//   the system prompt again for each request, so what was given once is given each time, as
//   a client that keeps it in the conversation would; never into its title, summary or
//   compaction requests (they carry no environment block);
// - `session.idle` (a turn done) runs `stop`, `experimental.session.compacting` runs
//   `pre-compact`: the command stores the session's new turns from OpenCode's database after
//   OpenCode has moved on (it forks and exits at once).
// Nothing here may break OpenCode: every hook catches everything, a command that fails, hangs
// past its timeout or prints something else gives no context.
import { spawn } from "node:child_process"
import { homedir } from "node:os"
import { join } from "node:path"

const HOOKS = __LOCALMEM_HOOKS__ // localmem-hooks
const ENV_BLOCK = /<env>\s*\n\s*Working directory:/ // what OpenCode puts in a main turn's system prompt only

function database() {
  const data = process.env.XDG_DATA_HOME || join(homedir(), ".local", "share")
  return join(data, "opencode", "opencode.db")
}

// The hook command for `event` with `payload` on stdin; resolves to its context ("" for none), never rejects.
function run(event, payload) {
  const hook = HOOKS.events[event]
  if (!hook) return Promise.resolve("")
  return new Promise((resolve) => {
    let out = ""
    let done = false
    let timer
    const finish = (text) => {
      if (done) return
      done = true
      clearTimeout(timer)
      resolve(text)
    }
    try {
      const child = spawn(hook.argv[0], hook.argv.slice(1), { stdio: ["pipe", "pipe", "ignore"] })
      timer = setTimeout(() => {
        try {
          child.kill("SIGKILL")
        } catch {}
        finish("")
      }, hook.timeout * 1000)
      child.on("error", () => finish(""))
      child.stdout.setEncoding("utf8")
      child.stdout.on("data", (chunk) => {
        out += chunk
      })
      child.on("close", () => finish(contextOf(out)))
      child.stdin.on("error", () => {})
      child.stdin.end(JSON.stringify(payload))
    } catch {
      finish("")
    }
  })
}

function contextOf(out) {
  try {
    const line = out.trim()
    if (!line) return ""
    const reply = JSON.parse(line)
    return typeof reply?.additionalContext === "string" ? reply.additionalContext : ""
  } catch {
    return ""
  }
}

function promptOf(parts) {
  const texts = []
  for (const part of Array.isArray(parts) ? parts : []) {
    if (part?.type === "text" && typeof part.text === "string" && !part.synthetic && !part.ignored) texts.push(part.text)
  }
  return texts.join("\n\n")
}

export const LocalmemPlugin = async ({ directory }) => {
  const sessions = new Map() // sessionID -> {started, ready: Promise, given: string[]}
  const pending = new Set() // ingest hooks not yet exited: waited for when OpenCode shuts down

  const session = (id) => {
    let s = sessions.get(id)
    if (!s) {
      s = { started: false, ready: Promise.resolve(), given: [] }
      sessions.set(id, s)
    }
    return s
  }
  // session-start once per session, then `next` (a prompt's recall): one after the other, so
  // a prompt is not given again what the session start gave
  const then = (id, next) => {
    const s = session(id)
    if (!s.started) {
      s.started = true
      s.ready = s.ready.then(() => run("session-start", { sessionID: id, directory })).then((text) => {
        if (text) s.given.push(text)
      })
    }
    if (next) {
      s.ready = s.ready.then(next).then((text) => {
        if (text) s.given.push(text)
      })
    }
    s.ready = s.ready.catch(() => {})
    return s
  }
  const ingest = (event, id) => {
    const done = run(event, { sessionID: id, directory, database: database() })
    pending.add(done)
    done.finally(() => pending.delete(done))
    return done
  }

  return {
    "chat.message": async (input, output) => {
      try {
        const id = input?.sessionID
        if (!id) return
        const prompt = promptOf(output?.parts)
        then(id, () => run("prompt", { sessionID: id, directory, prompt }))
      } catch {}
    },
    "experimental.chat.system.transform": async (input, output) => {
      try {
        const id = input?.sessionID
        const system = output?.system
        if (!id || !Array.isArray(system) || !system.some((s) => typeof s === "string" && ENV_BLOCK.test(s))) return
        const s = then(id, null)
        await s.ready
        if (s.given.length) system.push(s.given.join("\n\n"))
      } catch {}
    },
    "experimental.session.compacting": async (input) => {
      try {
        if (input?.sessionID) await ingest("pre-compact", input.sessionID)
      } catch {}
    },
    event: async ({ event }) => {
      try {
        if (event?.type === "session.idle" && event.properties?.sessionID) await ingest("stop", event.properties.sessionID)
      } catch {}
    },
    dispose: async () => {
      try {
        await Promise.allSettled([...pending])
      } catch {}
    },
  }
}
