"""Values: the frozen inputs every prediction is a function of (model, machine, workload) and the
tables of number formats. Nothing here reads a file or imports a higher layer."""
