"""One rank of a test job (launcher.run_job starts W of them): joins the framework's job, then calls
``fn(rank, world, **kwargs)`` from the scenario module at `path`. Exits 0, or 1 after printing the
traceback.

    python rank_worker.py PATH FN RANK WORLD PORT KWARGS_JSON
"""

import importlib.util
import json
import os
import sys
import traceback


def main():
    path, fn_name = sys.argv[1], sys.argv[2]
    rank, world, port, kwargs = int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), json.loads(sys.argv[6])
    sys.path.insert(0, os.path.dirname(path))
    mindspore = os.environ.get("HP_TEST_FRAMEWORK") == "mindspore"
    if mindspore:
        import mindspore  # noqa: F401 (imported first: the platform chooser must pick it on its own)
    elif os.environ.get("HP_TEST_NO_DIST") != "1":
        import torch.distributed as dist

        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    spec = importlib.util.spec_from_file_location("scenario_module", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules["scenario_module"] = mod  # importable by name (MindSpore's graph compiler looks it up)
    spec.loader.exec_module(mod)
    getattr(mod, fn_name)(rank, world, **kwargs)
    if mindspore and "torch" in sys.modules:
        raise AssertionError("a MindSpore job imported torch")


if __name__ == "__main__":
    try:
        main()
    except BaseException:
        traceback.print_exc()
        sys.stderr.flush()
        os._exit(1)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
