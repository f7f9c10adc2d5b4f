"""Plans as Context's services: making them (planning.py), their records' life (records.py),
review and apply under the project's rules (reviews.py), data diffs shown in a review,
and plans of pushed commits (git_repo.py, git_worker.py, deployed.py). May import
apply/, intervals/, evaluate/ and the seams."""
