// Package conform is softnic's micro-behaviour report and conformance
// suite, after Lumina (Yu et al., SIGCOMM 2023): a switch drops,
// ECN-marks, corrupts, delays or duplicates exactly one packet of a QP
// (package dataplane/inject) and mirrors every RoCE packet with its
// ingress timestamp; Analyze turns that trace into the NIC's
// micro-behaviour — how long the responder took to NAK, the requester to
// resend, the notification point to send a CNP, what go-back-N resent for
// nothing — all measured at the switch, as Lumina measures a hardware NIC.
//
// The suite (suite.go) runs named cases, each one workload on one QP and
// one rule, for every registered loss-recovery scheme on the embedded
// fabric (two hosts under one switch, fake clock, seeded), and judges
// each scheme against the IBA rules and against what docs/recovery.md
// says the scheme does, check by check. A failed check is a finding about
// the scheme, reported as measured.
package conform
