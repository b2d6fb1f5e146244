import os


def pytest_collection_modifyitems(config, items):
    """Only the QUICK tests unless HP_TORCH_SUITE=all (the whole suite, `make test-full`)."""
    if os.environ.get("HP_TORCH_SUITE") == "all":
        return
    from test_distributed_suite import QUICK

    keep = [i for i in items if i.name in QUICK]
    config.hook.pytest_deselected(items=[i for i in items if i.name not in QUICK])
    items[:] = keep
    assert keep, "no test of the quick set was collected"
