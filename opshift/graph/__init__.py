"""The model as a graph: scopes (graphs, subgraphs, functions), names, tensor values, the facts
a rewrite reads (types, shapes, constants, uses) and the edits it writes."""
