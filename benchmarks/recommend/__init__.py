"""``recommend``: the fastest variant that is provably within a margin of the baseline.

request (what is asked, torch-free), split (the search/certify split), power (the smallest
certifiable margin), space (the search space from the registry), search (Optuna over the
search split), waves (trials measured through the executors), memo (earlier trials from the
store), certificate (the fixed-sequence test on the certify split), recipe (the winner as a
command and a spec), stopping (the one stop check), pipeline (all of it, stored as a run).
"""

__all__ = ["certificate", "memo", "pipeline", "power", "recipe", "request", "search", "space",
           "split", "stopping", "waves"]
