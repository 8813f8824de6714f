"""fp8lab.results: a run folder's tables in pandas (issue 43). Being written."""


def load(run_dir):
    raise NotImplementedError("fp8lab.results.load: not yet")
