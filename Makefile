# ssegate build, test and tooling. `make run` and `make test` are the two commands the README promises.

GO                     ?= go
GOLANGCI_LINT_VERSION  := v2.15.0
CACHE                  ?= $(HOME)/.cache/ssegate
GOLANGCI_LINT          := $(CACHE)/bin/golangci-lint-$(GOLANGCI_LINT_VERSION).d/golangci-lint
GOTEST_FLAGS           ?= -race -count=1 -timeout 15m
FUZZTIME               ?= 15s

.PHONY: run deps test test-go test-k8s e2e-k8s lint fmt vet bench fuzz tidy-check build clean loadtest image helm-docs

## run: gateway + local Kafka + demo producer; open http://127.0.0.1:8080/
run:
	services/demo/run.sh

BROWSER_DEPS           := pkg/browsertest/node_modules/.package-lock.json

## deps: install what the tests need and the machine lacks (Debian packages as root; nginx and the registry into the cache)
deps:
	pkg/testenv/deps.sh install test

## test: every test, against a real Kafka and Redis started for the run (and headless Chromium); installs what is missing first
test: deps $(BROWSER_DEPS)
	pkg/kafkatest/with-services.sh -- $(MAKE) --no-print-directory test-go

$(BROWSER_DEPS): pkg/browsertest/package.json pkg/browsertest/package-lock.json
	cd pkg/browsertest && npm ci --no-audit --no-fund

POOL_REPEAT            ?= 10

test-go:
	$(GO) vet ./...
	$(GO) test $(GOTEST_FLAGS) ./...
	@# The writer pool's tests race real sockets and timers: run them again and again, so that a flaky one
	@# shows up here rather than after it lands.
	$(GO) test -race -count=$(POOL_REPEAT) -run '^TestPool' ./services/gateway/internal/stream/

KUBE_TEST_FLAGS        ?= -race -count=1 -timeout 20m

## test-k8s: the chart on a real kube-apiserver and etcd (built and cached on first use, about 10 min cold)
test-k8s:
	$(GO) vet -tags kube ./k8s/cluster/
	k8s/cluster/with-cluster.sh -- $(GO) test -tags kube $(KUBE_TEST_FLAGS) -run '^TestChartOnAPIServer$$' ./k8s/cluster/

## e2e-k8s: the chart on a real node (kubelet, containerd, runc, CNI bridge) with Kafka and the images; root
e2e-k8s:
	pkg/testenv/deps.sh install k8s
	k8s/cluster/with-cluster.sh --node -- $(GO) test -tags kube $(KUBE_TEST_FLAGS) -run '^TestChart(SlowStart)?OnNode$$' ./k8s/cluster/

## image: an OCI image tarball of each service in .run/image (IMAGE_PLATFORMS=linux/amd64,linux/arm64 for multi-arch)
image:
	k8s/image/image.sh

## helm-docs: the chart's values.schema.json and README values table, from the comments in values.yaml
helm-docs:
	$(GO) run ./helm/chartdoc

## build: the service binaries into .run/bin
build:
	mkdir -p .run/bin
	$(GO) build -trimpath -o .run/bin/ ./services/...

LOADTEST_ARGS          ?= --mode=steady --connections=50 --rate=200 --duration=10s

## loadtest: a short load scenario (LOADTEST_ARGS) against a local Kafka and gateway; prints the summary line
loadtest: build
	$(GO) build -trimpath -o .run/bin/loadtest ./loadtest
	pkg/kafkatest/with-services.sh --no-redis --no-registry -- loadtest/local.sh $(LOADTEST_ARGS)

$(GOLANGCI_LINT):
	GOBIN=$(dir $(GOLANGCI_LINT)) $(GO) install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION)

## lint: golangci-lint with the project's config (installed on first use)
lint: $(GOLANGCI_LINT)
	$(GOLANGCI_LINT) run ./...

## fmt: gofumpt and goimports through golangci-lint
fmt: $(GOLANGCI_LINT)
	$(GOLANGCI_LINT) fmt ./...

vet:
	$(GO) vet ./...

## bench: Go benchmarks of the hot paths
bench:
	$(GO) test -run '^$$' -bench . -benchmem ./...

## fuzz: each fuzz target for FUZZTIME
fuzz:
	@set -e; for pkg in $$($(GO) list ./...); do \
		for f in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz' || true); do \
			echo "fuzz $$pkg $$f"; $(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) $$pkg; \
		done; \
	done

## tidy-check: go.mod and go.sum are tidy
tidy-check:
	$(GO) mod tidy -diff

clean:
	rm -rf .run
