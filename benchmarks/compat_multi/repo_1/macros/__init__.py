from sqlmesh import macro


@macro()
def dup(evaluator):
    return "'repo_1'"
