"""Step 6: the harness commands on a built bundle: embed, bench and verify (references,
metrics and the gate, report), with the child processes they run (workers)."""
