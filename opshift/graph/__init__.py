"""The model as a graph: scopes (graphs, subgraphs, functions, the tensor a Constant holds),
names, the facts a rewrite reads (types, shapes, constants, uses) and the edits it writes."""
