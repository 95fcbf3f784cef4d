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

IRN_TITLE = fat tree k = 6, 70% load, arrivals over 2ms, mean of 3 seeds

plots: ## redraw docs/results' PNGs from the committed CSVs (no sweep is rerun)
	$(GO) run ./cmd/softnic-sweep plot-loss -in docs/results/loss.csv -out docs/results/loss.png
	$(GO) run ./cmd/softnic-sweep plot-loss -in docs/results/testbed-loss.csv -out docs/results/testbed-loss.png \
		-title "RDMA WRITE goodput under loss, two-host testbed (AF_XDP, both directions)"
	$(GO) run ./cmd/softnic-sweep plot-qps -in docs/results/qps.csv -out docs/results -prefix qps -note "embedded, SRAM 76800 B"
	$(GO) run ./cmd/softnic-sweep plot-qps -in docs/results/qps_fasr.csv -out docs/results -prefix qps_fasr -note "embedded, SRAM 1400000 B"
	$(GO) run ./cmd/softnic-sweep plot-qps -in docs/results/testbed-qps.csv -out docs/results -prefix testbed-qps -note "testbed, SRAM 76800 B"
	$(GO) run ./cmd/softnic-sweep plot-star -in docs/results/star-fig5a.csv -out docs/results
	$(GO) run ./cmd/softnic-sweep plot-irn -in docs/results/irn-fig1.csv -title "IRN Figs. 1-3 (embedded): fat tree k = 6, 40 Gb/s, 2 µs links, 70% load, arrivals over 2ms, mean of 3 seeds"
	for cc in dcqcn timely; do $(GO) run ./cmd/softnic-sweep plot-irn -in docs/results/irn-fig4-$$cc.csv -title "IRN with $$cc (embedded): $(IRN_TITLE)" || exit 1; done
	$(GO) run ./cmd/softnic-sweep plot-irn -in docs/results/irn-fig7.csv -title "IRN Fig. 7 (embedded), no congestion control: $(IRN_TITLE)"
	for cc in timely dcqcn; do $(GO) run ./cmd/softnic-sweep plot-irn -in docs/results/irn-fig7-$$cc.csv -title "IRN Fig. 7 (embedded), $$cc: $(IRN_TITLE)" || exit 1; done
	$(GO) run ./cmd/softnic-sweep plot-irn -in docs/results/irn-long.csv -title "IRN, longer (embedded): fat tree k = 6, 70% load, arrivals over 8ms, mean of 3 seeds"
	$(GO) run ./cmd/softnic-sweep plot-irn -incast -in docs/results/irn-fig9.csv -title "IRN Fig. 9 (embedded): incast of 150 MB into one host of a fat tree k = 6, mean of 3 seeds"
	$(GO) run ./cmd/softnic-sweep paper igbn-fig7 -out docs/results
	$(GO) run ./cmd/softnic-sweep plot-loss -in docs/results/testbed-igbn-fig6a-runs.csv -out docs/results/testbed-igbn-fig6a.png \
		-title "IGBN Fig. 6a, testbed: 4 MiB WRITEs one at a time, 1.5gbit, ACK timeout 134 ms (paper 100 ms)"
	$(GO) run ./cmd/softnic-sweep plot-loss -in docs/results/testbed-igbn-fig6b-runs.csv -out docs/results/testbed-igbn-fig6b.png \
		-title "IGBN Fig. 6b, testbed: 4 MiB WRITEs one at a time, 1.5gbit, ACK timeout 8.39 ms (paper 10 ms)"

# make ibverbs: softnic's drop-in libibverbs.so.1 (docs/ibverbs.md); needs
# gcc and rdma-core's headers (libibverbs-dev).
LIBDIR ?= $(PREFIX)/lib/softnic
ibverbs: ## build the drop-in libibverbs.so.1 into build/lib (needs libibverbs-dev)
	@test -f /usr/include/infiniband/verbs.h || { echo "make ibverbs needs rdma-core's headers: apt-get install libibverbs-dev"; exit 1; }
	mkdir -p build/lib
	CGO_ENABLED=1 $(GO) build -tags ibverbs -buildmode=c-shared \
		-ldflags "-extldflags '-Wl,--version-script=$(CURDIR)/ibverbs/libibverbs.map'" \
		-o build/lib/libibverbs.so.1 ./ibverbs/
	rm -f build/lib/libibverbs.so.h

# make rdmacm: softnic's drop-in librdmacm.so.1 (docs/rdmacm.md), a C
# library over the drop-in libibverbs.so.1 (its DT_NEEDED, whose private
# SOFTNIC_PRIVATE_1 interface it calls); needs librdmacm-dev's headers.
CC ?= cc
rdmacm: ibverbs ## build the drop-in librdmacm.so.1 into build/lib (needs librdmacm-dev)
	@test -f /usr/include/rdma/rdma_cma.h || { echo "make rdmacm needs rdma-core's headers: apt-get install librdmacm-dev"; exit 1; }
	$(CC) -shared -fPIC -O2 -fstack-protector-strong -Wall -Iibverbs -Wl,-soname,librdmacm.so.1 \
		-Wl,--version-script=$(CURDIR)/rdmacm/librdmacm.map -Wl,--no-undefined \
		-o build/lib/librdmacm.so.1 rdmacm/cma.c rdmacm/stubs_gen.c -Lbuild/lib -l:libibverbs.so.1

generate: ## rebuild the XDP object (needs clang, llvm, libbpf-dev)
	$(GO) generate ./bpf/

check: ## gofmt, go vet
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); exit 1; }
	$(GO) vet ./...

ci: ## what CI runs
	bash .ci/run

# make install: the binaries, the systemd unit template and the sysusers
# file of the socket group, under $(DESTDIR)$(PREFIX) (docs/deploy.md).
PREFIX ?= /usr/local
BINDIR ?= $(PREFIX)/bin
SYSTEMDUNITDIR ?= $(PREFIX)/lib/systemd/system
SYSUSERSDIR ?= $(PREFIX)/lib/sysusers.d
# The build information softnic version prints; the go command's own VCS
# stamp is missing in a git worktree and with GOFLAGS=-buildvcs=false.
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo unknown)
COMMIT ?= $(shell git rev-parse HEAD 2>/dev/null)
DIRTY ?= $(shell git rev-parse --git-dir >/dev/null 2>&1 && { test -z "$$(git status --porcelain 2>/dev/null)" && echo false || echo true; })
BUILDDIR ?= bin
BUILDINFO = github.com/softnic/softnic/internal/buildinfo
LDFLAGS = -X $(BUILDINFO).Version=$(VERSION) -X $(BUILDINFO).Commit=$(COMMIT) -X $(BUILDINFO).Dirty=$(DIRTY)

build: ## build softnic, softnic-bench and softnic-sweep into bin/ (BUILDDIR)
	$(GO) build -ldflags '$(LDFLAGS)' -o '$(BUILDDIR)/' ./cmd/softnic ./cmd/softnic-bench ./cmd/softnic-sweep

install: build ## install binaries, systemd unit, sysusers file (PREFIX=/usr/local, DESTDIR)
	install -d '$(DESTDIR)$(BINDIR)' '$(DESTDIR)$(SYSTEMDUNITDIR)' '$(DESTDIR)$(SYSUSERSDIR)'
	install -m 0755 '$(BUILDDIR)/softnic' '$(BUILDDIR)/softnic-bench' '$(BUILDDIR)/softnic-sweep' '$(DESTDIR)$(BINDIR)/'
	sed 's|/usr/local/bin/softnic |$(BINDIR)/softnic |' contrib/systemd/softnic@.service > '$(DESTDIR)$(SYSTEMDUNITDIR)/softnic@.service.tmp'
	chmod 0644 '$(DESTDIR)$(SYSTEMDUNITDIR)/softnic@.service.tmp'
	mv '$(DESTDIR)$(SYSTEMDUNITDIR)/softnic@.service.tmp' '$(DESTDIR)$(SYSTEMDUNITDIR)/softnic@.service'
	install -m 0644 contrib/sysusers.d/softnic.conf '$(DESTDIR)$(SYSUSERSDIR)/softnic.conf'
	@# The drop-in libibverbs, if make ibverbs built it: in a directory of
	@# its own, so that only programs run with LD_LIBRARY_PATH=$(LIBDIR) use it.
	if test -f build/lib/libibverbs.so.1; then install -d '$(DESTDIR)$(LIBDIR)' && \
		install -m 0755 build/lib/libibverbs.so.1 '$(DESTDIR)$(LIBDIR)/libibverbs.so.1'; fi
	if test -f build/lib/librdmacm.so.1; then install -d '$(DESTDIR)$(LIBDIR)' && \
		install -m 0755 build/lib/librdmacm.so.1 '$(DESTDIR)$(LIBDIR)/librdmacm.so.1'; fi

uninstall: ## remove what install put there
	rm -f '$(DESTDIR)$(BINDIR)/softnic' '$(DESTDIR)$(BINDIR)/softnic-bench' '$(DESTDIR)$(BINDIR)/softnic-sweep' \
		'$(DESTDIR)$(SYSTEMDUNITDIR)/softnic@.service' '$(DESTDIR)$(SYSUSERSDIR)/softnic.conf' \
		'$(DESTDIR)$(LIBDIR)/libibverbs.so.1' '$(DESTDIR)$(LIBDIR)/librdmacm.so.1'

.PHONY: help demo test short bench fuzz plots generate check ci build install uninstall ibverbs rdmacm
