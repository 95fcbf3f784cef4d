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

generate: ## rebuild the XDP object (needs clang, llvm, libbpf-dev)
	$(GO) generate ./bpf/

check: ## gofmt, go vet
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); exit 1; }
	$(GO) vet ./...

ci: ## what CI runs
	bash .ci/run

.PHONY: help demo test short bench fuzz generate check ci
