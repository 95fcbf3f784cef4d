package bpf

// The object is compiled for little-endian BPF only: softnic runs on
// x86-64 and arm64 hosts. bpf2go also emits the C enum of verdict reasons
// (enum counter) as Go constants, so the two sides share one definition.
// Both multiarch include directories are listed (clang ignores a missing
// one) because uapi headers include <asm/types.h>, which Debian keeps in
// the per-architecture directory. The second line records the hash of the
// C source that the committed object was built from; TestGeneratedCurrent
// fails when xdp_steer.c changes without a `go generate`.
//
//go:generate go tool bpf2go -target bpfel -cc clang -cflags "-O2 -g -Wall -Werror" steer xdp_steer.c -- -I/usr/include/x86_64-linux-gnu -I/usr/include/aarch64-linux-gnu
//go:generate sh -c "sha256sum xdp_steer.c > xdp_steer.c.sha256"
