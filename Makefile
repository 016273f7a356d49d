# changeflow — the two commands that matter are `make run` and `make test`.
GO          ?= go
BIN         := bin/changeflow
STATICCHECK := honnef.co/go/tools/cmd/staticcheck@v0.8.2
VERSION     ?= $(shell git describe --always --dirty 2>/dev/null || echo dev)
LDFLAGS     := -X main.version=$(VERSION)

.PHONY: run test build web bench lint clean image image-test unit-test browser-test fuzz

## web: rebuild the embedded web app when web/ changed since the committed build (Node needed only then)
web:
	@if command -v node >/dev/null 2>&1; then node web/scripts/build-if-changed.mjs; \
	else echo "node not found: serving the committed web build (internal/web/dist)"; fi

## build: the single static binary
build: web
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/changeflow

## image: the container image (Containerfile, FROM scratch) with buildah, podman or docker
IMAGE ?= localhost/changeflow:$(VERSION)
image: build
	@ctx=$$(mktemp -d) && ./scripts/image-context.sh "$$ctx" && \
	if command -v buildah >/dev/null 2>&1; then buildah bud --format docker -t $(IMAGE) "$$ctx"; \
	elif command -v podman >/dev/null 2>&1; then podman build --format docker -t $(IMAGE) "$$ctx"; \
	else docker build -t $(IMAGE) "$$ctx"; fi; rc=$$?; rm -rf "$$ctx"; exit $$rc

## image-test: build the image in a throwaway buildah store and smoke-test it
image-test: build
	./scripts/image-test.sh

## unit-test: systemd-analyze verify and security of deploy/changeflow.service
unit-test: build
	./scripts/systemd-verify.sh

## run: the whole system locally (SQLite under ./var, simulators, web app)
run: build
	./$(BIN) serve --local

## test: the full suite; starts throwaway MariaDB and etcd when installed
# After the suite, each fuzz target explores for FUZZTIME beyond its
# committed corpus (which the plain run already replays). `go test -fuzz`
# takes one target and links a coverage-instrumented test binary each
# time; the targets of one package share one such binary (`go test -c
# -fuzz`), run in the package's directory (its testdata/fuzz corpus) with
# the cache directory `go test -fuzz` would give it.
FUZZTIME ?= 5s
FUZZ_TARGETS := FuzzClientAddr:./internal/httpapi FuzzNormalize:./internal/identity FuzzIdentityResolution:./internal/identity FuzzDecodeSubmit:./internal/httpapi FuzzTargetAccess:./internal/config

# `go test` starts its -p (= cores) test binaries in the order the packages
# are named, and names each package once. `./...` alone is alphabetical,
# which starts internal/workflow, the longest package, last: it then runs on
# after everything else has finished, one slot idle. Naming the longest
# packages first (times in docs/benchmarks.md, "Test suite time") lets the
# short ones fill in around them.
TEST_FIRST := ./internal/workflow ./cmd/changeflow ./internal/store ./internal/httpapi ./internal/config

# -race also turns on the compiler's unsafe-pointer checks (checkptr) in
# every package. In modernc.org's SQLite — C translated to Go, pointer
# arithmetic on every line — those checks were half of a SQLite test's CPU
# (docs/benchmarks.md, "Test suite time"); they are off there alone. The
# race detector still instruments every package, SQLite's included, and
# checkptr stays on for changeflow's code and every other dependency.
RACE := -race -gcflags=modernc.org/...=-d=checkptr=0

# Each phase prints its start time (UTC), so a run's log shows where its
# minutes went.
# A comma inside a $(call …) argument.
, := ,
PHASE = @echo "== make test: $(1) at $$(date -u +%T)"

# The workflow's end-to-end journeys (storetest.OnSQLite: one request's
# or batch's way through its steps, on SQLite, each a subtest named
# JOURNEY) prove a sequence, not a race: they run in a second `go test`
# without -race, beside the first, which skips them. Under -race stay the
# store's conformance suite on both databases, every test on both
# (storetest.Each: engines, rounds, sweeps and callbacks racing over one
# database), the tests whose own goroutines race (storetest.RaceOnSQLite),
# the process and kill tests, and every other package. The same pattern
# skips in one run what the other runs, so each journey runs exactly once;
# a journey nested in a table's subtest is not matched and stays under
# -race. The journeys' run names its packages, so its -run, which runs
# every top-level test without subtests whole, repeats only those; the
# kill tests (RACE_ONLY) are whole processes and are not repeated
# (docs/storage.md, "Which tests run under -race").
JOURNEY      := /^sqlite-journey$$
RACE_ONLY    := ^TestKill9
ON_SQLITE    := storetest[.]OnSQLite[(]
JOURNEY_PKGS := $(patsubst %/,./%,$(sort $(dir $(shell grep -rl --include='*_test.go' '$(ON_SQLITE)' internal cmd))))

test:
	$(call PHASE,Go tests with the browser tests$(,) fuzzing and the image checks beside them)
	@logs=$$(mktemp -d) || exit 1; \
	$(MAKE) --no-print-directory browser-test > "$$logs/browser" 2>&1 & browser=$$!; \
	$(MAKE) --no-print-directory fuzz > "$$logs/fuzz" 2>&1 & fuzz=$$!; \
	$(MAKE) --no-print-directory image-test unit-test > "$$logs/image" 2>&1 & image=$$!; \
	./scripts/test-services.sh sh -c '\
		$(GO) test $(RACE) -count=1 -timeout 15m -skip "$(JOURNEY)" $(TEST_FIRST) ./... & race=$$!; \
		$(GO) test -count=1 -timeout 15m -run "$(JOURNEY)" -skip "$(RACE_ONLY)" $(JOURNEY_PKGS) & journeys=$$!; \
		wait $$race; r=$$?; wait $$journeys; j=$$?; \
		[ $$r -eq 0 ] || echo "== make test: the -race run failed"; \
		[ $$j -eq 0 ] || echo "== make test: the journeys run (without -race) failed"; \
		[ $$r -eq 0 ] && [ $$j -eq 0 ]'; g=$$?; \
	echo "== make test: Go tests ended at $$(date -u +%T)"; \
	wait $$image; i=$$?; wait $$fuzz; f=$$?; wait $$browser; b=$$?; \
	echo "== make test: the image and unit checks, fuzzing and the browser tests (beside the Go tests) ended by $$(date -u +%T)"; \
	cat "$$logs/image" "$$logs/fuzz" "$$logs/browser"; rm -rf "$$logs"; \
	[ $$g -eq 0 ] || echo "== make test: the Go tests failed"; \
	[ $$i -eq 0 ] || echo "== make test: the image or unit checks failed"; \
	[ $$f -eq 0 ] || echo "== make test: fuzzing failed"; \
	[ $$b -eq 0 ] || echo "== make test: the browser tests failed"; \
	[ $$g -eq 0 ] && [ $$i -eq 0 ] && [ $$f -eq 0 ] && [ $$b -eq 0 ]
	$(call PHASE,done)

## browser-test: the web app's browser tests (Playwright, Debian's chromium) and the API types' drift check
# `make test` runs the browser tests, fuzzing and the image and unit
# checks beside the Go tests, whose long pole (cmd/changeflow) outlasts
# them all, and prints their logs after the Go tests'. The suite is CPU
# bound on two cores (docs/benchmarks.md, "Test suite time"): run one
# after another, fuzzing's instrumented builds and the image's static
# build stood alone at the end for minutes; beside the Go tests they fill
# the moments the process tests wait.
browser-test:
	@if command -v npm >/dev/null 2>&1; then \
		npm ci --prefix web --no-audit --no-fund && npm run gen:api:check --prefix web && GO=$(GO) npm test --prefix web; \
	elif [ "$$CHANGEFLOW_TEST_REQUIRE_SERVICES" = 1 ]; then echo "npm is required for the web app's browser tests"; exit 1; \
	else echo "*** SKIPPING the web app's browser tests: npm not found ***"; fi

## fuzz: each fuzz target explores for FUZZTIME beyond its committed corpus
fuzz:
	@bins=$$(mktemp -d) && trap 'rm -rf "$$bins"' EXIT && \
	for pkg in $(sort $(foreach t,$(FUZZ_TARGETS),$(lastword $(subst :, ,$(t))))); do \
		bin="$$bins/$$(basename $$pkg).test"; \
		$(GO) test -c -fuzz . -o "$$bin" "$$pkg" || exit 1; \
		cache="$$($(GO) env GOCACHE)/fuzz/$$($(GO) list "$$pkg")"; \
		for t in $(FUZZ_TARGETS); do \
			[ "$${t#*:}" = "$$pkg" ] || continue; \
			echo "fuzz $${t%%:*} for $(FUZZTIME)"; \
			(cd "$$pkg" && "$$bin" -test.run '^$$' -test.fuzz "^$${t%%:*}$$" -test.fuzztime $(FUZZTIME) \
				-test.fuzzcachedir "$$cache") || exit 1; \
		done; \
	done

## bench: Go benchmarks (see docs/benchmarks.md for how results are compared)
bench:
	./scripts/test-services.sh $(GO) test -run '^$$' -bench . -benchmem -count 6 ./... | tee bench.txt

## lint: gofmt, go mod tidy, go vet and staticcheck (fetched from the module proxy)
# `go mod tidy -diff` changes nothing and exits non-zero with the diff when
# go.mod or go.sum is not tidy (a direct dependency marked indirect, a
# requirement nothing imports, a missing checksum).
lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt:"; echo "$$out"; exit 1; fi
	@$(GO) mod tidy -diff || { echo "go.mod/go.sum are not tidy: run go mod tidy"; exit 1; }
	$(GO) vet ./...
	$(GO) run $(STATICCHECK) ./...

clean:
	rm -rf bin var/changeflow.db*
