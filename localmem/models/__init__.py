"""Model backends behind small protocols: the embedders (ONNX MiniLM, GGUF through
llama.cpp), the generator (llama.cpp), the registry that resolves configured names to
instances for every entry point, and the one parser of model replies.

A leaf: imports nothing of localmem but ``errors``, ``config`` and ``util``.
"""
