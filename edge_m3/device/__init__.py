"""The shipped device commands on a built bundle: embed, check (golden.json on the device) and
bench, each through the one DevicePipeline, with the child processes they run (workers)."""
