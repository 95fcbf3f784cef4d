# softnic: make help lists the targets.
.DEFAULT_GOAL := help
GO ?= go

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-10s %s\n", $$1, $$2}'

demo: ## run the main job (embedded fabric demo, no privileges)
	$(GO) run ./cmd/softnic demo

test: ## run every test with the race detector (privileged ones need root)
	$(GO) test -race ./...

short: ## quick test run without the race detector
	$(GO) test -short ./...

bench: ## transport and wire-format benchmarks
	$(GO) test -run '^$$' -bench . -benchmem ./bth/ ./dataplane/ ./dataplane/timer/ ./dataplane/fabric/

fuzz: ## fuzz the frame parser and the receive path, 30 s each
	$(GO) test -run '^$$' -fuzz FuzzParseFrame -fuzztime 30s ./bth/
	$(GO) test -run '^$$' -fuzz FuzzReceive -fuzztime 30s ./dataplane/

plots: ## redraw docs/results' PNGs from the committed CSVs (no sweep is rerun)
	$(GO) run ./cmd/softnic-sweep plot-loss -in docs/results/loss.csv -out docs/results/loss.png
	$(GO) run ./cmd/softnic-sweep plot-loss -in docs/results/testbed-loss.csv -out docs/results/testbed-loss.png \
		-title "RDMA WRITE goodput under loss, two-host testbed (AF_XDP, both directions)"
	$(GO) run ./cmd/softnic-sweep plot-qps -in docs/results/qps.csv -out docs/results -prefix qps -note "embedded, SRAM 76800 B"
	$(GO) run ./cmd/softnic-sweep plot-qps -in docs/results/qps_fasr.csv -out docs/results -prefix qps_fasr -note "embedded, SRAM 1400000 B"
	$(GO) run ./cmd/softnic-sweep plot-qps -in docs/results/testbed-qps.csv -out docs/results -prefix testbed-qps -note "testbed, SRAM 76800 B"

generate: ## rebuild the XDP object (needs clang, llvm, libbpf-dev)
	$(GO) generate ./bpf/

check: ## gofmt, go vet
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); exit 1; }
	$(GO) vet ./...

ci: ## what CI runs
	bash .ci/run

.PHONY: help demo test short bench fuzz plots generate check ci
