"""Training localmem's own embedder (``localmem train``): MiniLM fine-tuned on LongMemEval
question -> evidence pairs and on pairs cut from chat text, exported as an int8 ONNX
embedder folder that ``localmem.models.onnx_folder`` loads.

Needs the ``train`` extra (PyTorch, onnx); nothing at run time imports this package.
Sits beside ``bench`` in the layers: it reads data and uses models and storage's
turn-text rules, and only the CLI imports it.
"""
