// Package protoconv converts between the control protocol's wire forms
// (package proto) and the engine's types (package dataplane): QP
// attributes, the device description, the counters, and the wire codes of
// the engine's errors. It is what keeps proto free of the engine: the
// daemon and the verbs library, which link the engine anyway, import it.
package protoconv

import (
	"slices"

	"github.com/softnic/softnic/dataplane"
	"github.com/softnic/softnic/qp"
	"github.com/softnic/softnic/recovery"
	"github.com/softnic/softnic/verbs/internal/proto"
)

// FromQPAttr puts the engine's QP attributes in their wire form.
func FromQPAttr(a *dataplane.QPAttr) proto.QPAttr {
	return proto.QPAttr{
		State: a.State, CurState: a.CurState, AccessFlags: a.AccessFlags, PKeyIndex: a.PKeyIndex, Port: a.Port,
		DGID: a.AV.DGID, DMAC: a.AV.DMAC, TrafficClass: a.AV.TrafficClass, HopLimit: a.AV.HopLimit, FlowLabel: a.AV.FlowLabel,
		PathMTU: a.PathMTU, DestQPN: a.DestQPN, RQPSN: a.RQPSN, SQPSN: a.SQPSN,
		MaxDestRdAtomic: a.MaxDestRdAtomic, MaxRdAtomic: a.MaxRdAtomic, MinRNRTimer: a.MinRNRTimer,
		Timeout: a.Timeout, RetryCnt: a.RetryCnt, RNRRetry: a.RNRRetry, QKey: a.QKey,
	}
}

// ToQPAttr is FromQPAttr's inverse.
func ToQPAttr(a *proto.QPAttr) dataplane.QPAttr {
	return dataplane.QPAttr{
		State: a.State, CurState: a.CurState, AccessFlags: a.AccessFlags, PKeyIndex: a.PKeyIndex, Port: a.Port,
		AV:      dataplane.AddressVector{DGID: a.DGID, DMAC: a.DMAC, TrafficClass: a.TrafficClass, HopLimit: a.HopLimit, FlowLabel: a.FlowLabel},
		PathMTU: a.PathMTU, DestQPN: a.DestQPN, RQPSN: a.RQPSN, SQPSN: a.SQPSN,
		MaxDestRdAtomic: a.MaxDestRdAtomic, MaxRdAtomic: a.MaxRdAtomic, MinRNRTimer: a.MinRNRTimer,
		Timeout: a.Timeout, RetryCnt: a.RetryCnt, RNRRetry: a.RNRRetry, QKey: a.QKey,
	}
}

// Codes is the error table both ends of the protocol use: proto's own
// sentinels, then the engine's, most specific first.
var Codes = slices.Concat(proto.Base, proto.Codes{
	{Code: "bad_pd", Err: dataplane.ErrBadPD},
	{Code: "bad_mr", Err: dataplane.ErrBadMR},
	{Code: "empty_mr", Err: dataplane.ErrEmptyMR},
	{Code: "bad_access", Err: dataplane.ErrBadAccess},
	{Code: "busy", Err: dataplane.ErrBusy},
	{Code: "bad_qp", Err: dataplane.ErrBadQP},
	{Code: "bad_cq", Err: dataplane.ErrBadCQ},
	{Code: "queue_size", Err: dataplane.ErrQueueSize},
	{Code: "transition", Err: dataplane.ErrTransition},
	{Code: "attrs", Err: dataplane.ErrAttrs},
	{Code: "attr_value", Err: dataplane.ErrAttrValue},
	{Code: "queue_full", Err: dataplane.ErrQueueFull},
	{Code: "post_state", Err: dataplane.ErrPostState},
	{Code: "bad_wr", Err: dataplane.ErrBadWR},
	{Code: "cq_overflow", Err: dataplane.ErrCQOverflow},
	{Code: "unknown_scheme", Err: dataplane.ErrUnknownScheme},
	{Code: "scheme_state", Err: dataplane.ErrSchemeState},
	{Code: "star_server_off", Err: dataplane.ErrStarServerOff},
	{Code: "star_scheme", Err: dataplane.ErrStarScheme},
	{Code: "star_server_wr", Err: dataplane.ErrStarServerWR},
	{Code: "star_atomic", Err: dataplane.ErrStarAtomic},
	{Code: "star_opcode", Err: dataplane.ErrStarOpcode},
	{Code: "star_peer", Err: dataplane.ErrStarPeer},
	{Code: "bad_ah", Err: dataplane.ErrBadAH},
	{Code: "ah_attr", Err: dataplane.ErrAHAttr},
	{Code: "qp_type", Err: dataplane.ErrUDQP},
	{Code: "no_neighbor", Err: dataplane.ErrNoNeighbor},
	{Code: "srq_destroyed", Err: dataplane.ErrSRQDestroyed},
	{Code: "srq_attr", Err: dataplane.ErrSRQAttr},
	{Code: "has_srq", Err: dataplane.ErrHasSRQ},
	{Code: "srq_transport", Err: dataplane.ErrSRQTransport},
})

// EncodeError turns err into its wire form (the daemon's side).
func EncodeError(err error) *proto.Error { return Codes.Encode(err) }

// DecodeError rebuilds a daemon's error on the client: it has the daemon's
// message and errors.Is the sentinel the engine returned.
func DecodeError(e *proto.Error) error { return Codes.Decode(e) }

// DeviceOf describes engine e as device name: query_device's answer in
// both modes.
func DeviceOf(e *dataplane.Engine, name string) proto.Device {
	return proto.Device{
		Name: name, GID: e.Addr(), MAC: e.MAC(), Scheme: e.Scheme().Name(), Schemes: recovery.Names(),
		MaxQPWR: dataplane.MaxWR, MaxCQE: proto.MaxCQE, MaxSGE: qp.MaxSGE, MaxQPRdAtom: dataplane.MaxRdAtomic,
		StarServer: e.StarServer(),
	}
}

// CountersOf lists e's counters in display order.
func CountersOf(e *dataplane.Engine) []proto.Counter {
	c := e.Counters()
	var out []proto.Counter
	c.Each(func(name string, v uint64) { out = append(out, proto.Counter{Name: name, Value: v}) })
	return out
}

// FromStarTable puts a StaR memory table in its wire form.
func FromStarTable(t []dataplane.StarRegion) []proto.StarRegion {
	out := make([]proto.StarRegion, len(t))
	for i, r := range t {
		out[i] = proto.StarRegion{RKey: r.RKey, VA: r.VA, Length: r.Length, Access: r.Access}
	}
	return out
}

// ToStarTable is FromStarTable's inverse.
func ToStarTable(t []proto.StarRegion) []dataplane.StarRegion {
	out := make([]dataplane.StarRegion, len(t))
	for i, r := range t {
		out[i] = dataplane.StarRegion{RKey: r.RKey, VA: r.VA, Length: r.Length, Access: r.Access}
	}
	return out
}
