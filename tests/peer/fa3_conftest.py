"""pytest conftest that runs FlashAttention-3's hopper tests (hopper/test_flash_attn.py, fetched
from Dao-AILab/flash-attention, never committed) against attnkit.flash_attn_interface: the tests'
`from flash_attn_interface import ...` resolves to attnkit. scripts/peer_tests.sh copies this file
beside the fetched tests as conftest.py.

ATTNKIT_PEER_SAMPLE=N keeps a deterministic random sample of N cases per test function (the
suite has about 110k cases). Two tests are not run: test_flash_attn_race_condition (a 70 GiB
allocation and 1000 forward+backward passes per case) and test_flash3_bw_compatibility (it reads
the schemas of FlashAttention-3's own torch.ops.flash_attn_3 ops). attnkit is forward-only, so every
test runs under torch.no_grad() (with FLASH_ATTENTION_DISABLE_BACKWARD set, the tests make no
backward calls; their inputs still ask for gradients, which attnkit would refuse).
"""

import os
import random
import sys

import pytest
import torch

import attnkit.flash_attn_interface as _attnkit_fa3

sys.modules["flash_attn_interface"] = _attnkit_fa3

_NOT_RUN = ("test_flash_attn_race_condition", "test_flash3_bw_compatibility")


@pytest.fixture(autouse=True)
def _forward_only():
    with torch.no_grad():
        yield


def pytest_report_header(config):
    return (f"flash_attn_interface = attnkit.flash_attn_interface; sample per test function: "
            f"{os.environ.get('ATTNKIT_PEER_SAMPLE', 'all')}; not run: {', '.join(_NOT_RUN)}")


def pytest_collection_modifyitems(config, items):
    per_fn = int(os.environ.get("ATTNKIT_PEER_SAMPLE", "0"))
    groups = {}
    for item in items:
        groups.setdefault(item.originalname, []).append(item)
    keep, drop = [], []
    for name, group in groups.items():
        if name in _NOT_RUN:
            drop += group
        elif per_fn and len(group) > per_fn:
            chosen = set(random.Random(name).sample(range(len(group)), per_fn))
            for i, item in enumerate(group):
                (keep if i in chosen else drop).append(item)
        else:
            keep += group
    if drop:
        config.hook.pytest_deselected(items=drop)
    items[:] = keep
