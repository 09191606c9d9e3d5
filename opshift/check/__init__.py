"""The structural check every command runs before it rewrites a model (:mod:`.structure`):
one O(nodes) walk, with what makes a parsed protobuf well formed (:mod:`.wellformed`), the
model-local functions' headers (:mod:`.functions`) and the activations' schemas
(:mod:`.activations`)."""
