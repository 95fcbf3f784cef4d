package cc

import "time"

// None is no congestion control, softnic's default and what it did before
// package cc existed: no rate limit, never a CNP, no timer, no ECT on the
// wire, and every CNP received ignored (rp_cnp_ignored). Its halves are
// empty values, so building and calling them allocates nothing.
const None = "none"

func init() {
	Register(None, func(p Params) Algorithm { return noneAlgorithm{p: p} })
}

type noneAlgorithm struct{ p Params }

func (a noneAlgorithm) Name() string          { return None }
func (a noneAlgorithm) Params() Params        { return a.p }
func (a noneAlgorithm) Caps() Caps            { return Caps{} }
func (a noneAlgorithm) NewSender() Sender     { return NoLimit{} }
func (a noneAlgorithm) NewReceiver() Receiver { return NoCNP{} }
func (a noneAlgorithm) Counters() []Counter   { return nil }

// NoLimit is a Sender that never limits its QP: rate 0, no timer, every
// CNP ignored. An algorithm that only watches some events may embed it.
type NoLimit struct{}

func (NoLimit) Reset(Time)                   {}
func (NoLimit) Rate() uint64                 { return 0 }
func (NoLimit) OnSent(Time, int)             {}
func (NoLimit) OnCNP(Time) bool              { return false }
func (NoLimit) OnRTT(Time, time.Duration)    {}
func (NoLimit) Deadline() (at Time, ok bool) { return 0, false }
func (NoLimit) OnTimer(Time)                 {}

// NoCNP is a Receiver that never asks for a CNP: the notification point
// of an algorithm that does not use ECN (none, Timely).
type NoCNP struct{}

func (NoCNP) Reset(Time)     {}
func (NoCNP) OnCE(Time) bool { return false }
