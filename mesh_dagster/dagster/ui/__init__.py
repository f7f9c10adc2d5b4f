"""`mesh ui`: the project's Dagster workspace and instance (workspace.py), the supervisor of the
webserver and daemon (supervisor.py), the watch that reloads code locations when state changes
(watch.py), and the stripped interpreter of the pushed location (pushed_python.py). The top room:
may import code_location.py and everything below it."""
