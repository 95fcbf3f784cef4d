module github.com/softnic/softnic

go 1.26.0

require (
	github.com/cilium/ebpf v0.22.0
	github.com/google/gopacket v1.1.19
	golang.org/x/sys v0.50.0
)

require golang.org/x/net v0.48.0 // indirect

tool github.com/cilium/ebpf/cmd/bpf2go
