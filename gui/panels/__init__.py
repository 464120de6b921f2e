"""The tabs and panes the user reads and edits: Model, Machine, Workload (with its Placement
group), Measure, the numbers, the stopwatch and Compare. Panels only ask and show: controllers
run their jobs, ``rooflab.core`` computes."""
