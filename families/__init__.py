"""The six task families: generators, tools, scorers, reference solvers, hidden eval sets."""
