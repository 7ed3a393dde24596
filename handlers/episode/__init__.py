"""The trainer agent's episode: workspace, tools, submissions, and the loop that drives a policy."""
