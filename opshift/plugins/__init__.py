"""opshift inside the tools users already run: :mod:`.onnx_ir` (passes), :mod:`.onnxscript`
(rewrite rules) and :mod:`.graphsurgeon` (graph methods). Each imports its tool; nothing
else in opshift imports these modules."""
