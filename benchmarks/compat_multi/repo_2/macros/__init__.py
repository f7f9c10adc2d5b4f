from sqlmesh import macro


@macro()
def dup(evaluator):
    return "'repo_2'"


@macro()
def two(evaluator):
    return 2
