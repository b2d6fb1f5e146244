# Entry points: build, test, bench, demo. `bash scripts/setup.sh` first on a fresh host.
PY ?= python3
JOBS ?= 2
CPP_BUILD ?= build/cpp

.PHONY: all build build-cpp install lint format docs test test-quick test-full test-cpp test-python test-sanitize fuzz soak bench demo demo-nodes demo-hosts clean

all: build

build: build-cpp install

build-cpp:
	cmake -S . -B $(CPP_BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release
	cmake --build $(CPP_BUILD) -j $(JOBS)

install:
	$(PY) -m pip install -q --disable-pip-version-check --no-build-isolation -e .

# The style the tree obeys (ruff for Python, clang-format for C and C++) and the generated OpenSHMEM
# header, checked; `make format` applies the formatters.
CXX_SOURCES = $(shell git ls-files '*.cc' '*.h' '*.c' | grep -v shmem_generic.h)
CLANG_FORMAT = $(shell $(PY) -c "import clang_format; print(clang_format.get_executable('clang-format'))")
lint:
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .
	$(CLANG_FORMAT) --dry-run -Werror $(CXX_SOURCES)
	$(PY) scripts/gen_shmem_generic.py --check

format:
	$(PY) -m ruff check --fix .
	$(PY) -m ruff format .
	$(CLANG_FORMAT) -i $(CXX_SOURCES)

# The documentation site (docs/, Sphinx): warnings are errors. Open build/docs/index.html.
docs: install
	$(PY) -m sphinx -W --keep-going -q -b html docs build/docs

# C++ runtime tests (GoogleTest via CTest), then the Python API tests (pytest), one test of each
# operation of torch's own distributed suite on the hpshmem backend, then the C++ tests again under
# the sanitizers. Serial: every test is a multi-process job on a 2-core host.
test: lint docs build-cpp
	ctest --test-dir $(CPP_BUILD) --output-on-failure
	$(PY) -m pytest tests/python tests/oshmem -q
	$(PY) -m pytest tests/torch_suite -q
	$(MAKE) test-sanitize

# One test of each capability, for the edit-test loop (a few minutes): the runtime (heap, RMA, signals,
# atomics, collectives, teams, failures, across simulated hosts), the Python API on both frameworks,
# groups, torch.compile, MindSpore graph mode, the torch.distributed backend, OpenSHMEM.
QUICK_CPP = ^(Heap.SameOffsetsOnEveryRankAndPtrTranslates|Rma.PutGetRoundTrips2Ranks|Signal.AllSixComparisonsWithNegativeValues|Amo.EveryOpFromEveryRankInt32_3Ranks|Collective.AllreduceEveryOpBothAlgorithmsBackToBack4Ranks|Team.TwoTeamsRunDifferentCollectivesConcurrently4Ranks|Failure.KilledRankIsReportedWithinFiveSeconds|Bootstrap.EndpointWithSecret|hosts/Rma.PutGetRoundTrips2Ranks)$$
QUICK_PY = tests/python/test_primitives.py::test_put_get_every_dtype_and_odd_size[torch-3] \
  tests/python/test_primitives.py::test_put_get_every_dtype_and_odd_size[mindspore-2] \
  tests/python/test_collectives.py::test_allgather_push_and_pull[torch-3] \
  tests/python/test_reductions.py::test_allreduce_every_dtype_op_and_size[torch-1] \
  tests/python/test_groups.py::test_two_groups_run_different_collectives_concurrently[torch-True] \
  tests/python/test_compile.py::test_compiled_step_is_bit_identical_to_eager[2] \
  tests/python/test_mindspore_graph.py::test_graph_mode_put_signal_wait_get_barrier_3_ranks \
  tests/python/test_hosts.py::test_scenario_across_hosts[scenario_put_get_all_dtypes-hosts-torch] \
  tests/python/test_backend.py::test_every_op_against_references[3] \
  tests/python/test_backend.py::test_point_to_point[shm] \
  "tests/python/test_moe.py::test_dispatch_and_combine_against_the_oracle[random-f32-4]" \
  "tests/python/test_moe.py::test_gradients_against_the_oracle[3-expert_major-True-float64]" \
  "tests/oshmem/test_oshmem.py::test_rma_every_type[3-extra1]"
test-quick: build-cpp install
	ctest --test-dir $(CPP_BUILD) --output-on-failure -R '$(QUICK_CPP)'
	$(PY) -m pytest -q $(QUICK_PY)

# The C++ suite (every layout) built with AddressSanitizer + UndefinedBehaviorSanitizer, then with
# ThreadSanitizer; any report fails the run. UCX's memory-event hooks patch mmap under TSan's own
# interceptors (a crash at start), so the TSan run turns them off; nothing else differs.
SAN_FLAGS = -DCMAKE_BUILD_TYPE=Debug -DHPSHMEM_BUILD_BENCHMARKS=OFF
test-sanitize:
	cmake -S . -B build/asan -G Ninja $(SAN_FLAGS) \
	  -DCMAKE_CXX_FLAGS="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer -O1"
	cmake --build build/asan -j $(JOBS)
	ASAN_OPTIONS=abort_on_error=1 ctest --test-dir build/asan --output-on-failure
	cmake -S . -B build/tsan -G Ninja $(SAN_FLAGS) -DCMAKE_CXX_FLAGS="-fsanitize=thread -fno-omit-frame-pointer -O1"
	cmake --build build/tsan -j $(JOBS)
	UCX_MEM_EVENTS=no TSAN_OPTIONS=halt_on_error=1 ctest --test-dir build/tsan --output-on-failure

# Everything `make test` runs, plus the heavy matrix (tests marked `full`: every dtype, size and layout of
# the torch.distributed backend).
test-full: build-cpp install
	ctest --test-dir $(CPP_BUILD) --output-on-failure
	$(PY) -m pytest tests/python tests/oshmem -q -m "full or not full"
	HP_TORCH_SUITE=all $(PY) -m pytest tests/torch_suite -q -p no:cacheprovider
	$(MAKE) test-sanitize

test-cpp: build-cpp
	ctest --test-dir $(CPP_BUILD) --output-on-failure

test-python: install
	$(PY) -m pytest tests/python tests/oshmem -q

# Longer runs by hand (not in CI): the property-based fuzz with many more examples and a fresh
# seed (the seed is printed; HP_FUZZ_SEED=<seed> reproduces), and the 10^5-round soak.
FUZZ_EXAMPLES ?= 3000
fuzz: install
	seed=$${HP_FUZZ_SEED:-$$(od -An -N2 -tu2 /dev/urandom | tr -d ' ')}; echo "HP_FUZZ_SEED=$$seed"; \
	HP_FUZZ_EXAMPLES=$(FUZZ_EXAMPLES) HP_FUZZ_SEED=$$seed $(PY) -m pytest tests/python/test_fuzz.py -q

soak: install
	$(PY) tests/python/soak.py --rounds 100000 --worlds 2 4 --out bench-results/soak.json

bench: build-cpp install
	mkdir -p bench-results
	$(CPP_BUILD)/bench_primitives --out bench-results/primitives.json
	$(PY) benchmarks/bench_python.py --out bench-results/python_primitives.json
	$(PY) benchmarks/bench_python.py --hosts --out bench-results/python_hosts.json
	$(PY) benchmarks/bench_collectives.py --ranks 2 --out bench-results/collectives.json
	$(PY) benchmarks/bench_collectives.py --ranks 4 --repeat 1 --out bench-results/collectives_4ranks.json
	$(PY) benchmarks/bench_oversubscribed.py --ranks 2,4,8 --out bench-results/oversubscribed.json
	$(PY) benchmarks/bench_adapters.py --repeat 3 --out bench-results/adapters.json
	$(PY) benchmarks/bench_hosts.py --repeat 2 --out bench-results/hosts.json
	$(PY) benchmarks/bench_collectives.py --ranks 4 --hosts --repeat 1 --out bench-results/collectives_hosts.json
	$(PY) benchmarks/bench_realhosts.py --repeat 2 --out bench-results/realhosts.json  # root: two network namespaces
	$(PY) benchmarks/bench_oshmem.py --repeat 3 --out bench-results/oshmem.json
	$(PY) benchmarks/bench_backend.py --repeat 2 --out bench-results/backend.json
	$(PY) benchmarks/bench_moe.py --repeat 2 --out bench-results/moe.json
	$(PY) benchmarks/report.py bench-results

demo: install
	torchrun --nproc-per-node 2 examples/put_signal.py
	torchrun --nproc-per-node 4 examples/ring.py
	torchrun --nproc-per-node 2 examples/fused_all_gather_matmul.py
	torchrun --nproc-per-node 4 examples/moe_layer.py
	GLOG_v=3 msrun --worker_num 2 --local_worker_num 2 --join True --log_dir build/msrun_logs \
	  --master_port $$($(PY) -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])') \
	  examples/mindspore/put_signal.py
	GLOG_v=3 msrun --worker_num 2 --local_worker_num 2 --join True --log_dir build/msrun_logs \
	  --master_port $$($(PY) -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])') \
	  examples/mindspore/moe_layer.py
	$(MAKE) demo-nodes

# Two torchrun "nodes" on this machine, each its own host to the library (HYPER_PARALLEL_SHMEM_HOST_ID):
# shared memory inside a node, UCX over TCP on loopback between them. On real nodes drop the two
# variables that simulate hosts and name the nodes' address in --master-addr.
# The same on two real hosts made on this machine (root): network namespaces joined by a veth pair,
# each node with a private /dev/shm and host name (tests/python/realhosts.py).
demo-hosts: install
	$(PY) tests/python/realhosts.py examples/ring.py

demo-nodes: install
	port=$$($(PY) -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'); \
	pids=""; for node in 0 1; do \
	  HYPER_PARALLEL_SHMEM_HOST_ID=node$$node UCX_TLS=tcp,self UCX_NET_DEVICES=lo \
	  torchrun --nnodes 2 --node-rank $$node --nproc-per-node 2 --master-addr 127.0.0.1 --master-port $$port \
	    examples/ring.py & pids="$$pids $$!"; \
	done; fail=0; for p in $$pids; do wait $$p || fail=1; done; exit $$fail

clean:
	rm -rf build
