// Package golden reads bth's golden vectors (bth/testdata/golden.json,
// written by bth/testdata/gen_golden.py with scapy), for the tests of
// package bth and of its gopacket layer.
package golden

import (
	"encoding/json"
	"os"
	"testing"
)

// Vector is one golden frame: its header fields as gen_golden.py set
// them, the whole frame in hex, and its ICRC.
type Vector struct {
	Name   string  `json:"name"`
	IPv6   bool    `json:"ipv6"`
	VLAN   *uint16 `json:"vlan"`
	Header struct {
		SrcMAC    string `json:"src_mac"`
		DstMAC    string `json:"dst_mac"`
		Src       string `json:"src"`
		Dst       string `json:"dst"`
		SrcPort   uint16 `json:"sport"`
		TOS       uint8  `json:"tos"`
		TTL       uint8  `json:"ttl"`
		FlowLabel uint32 `json:"flow_label"`
	} `json:"header"`
	BTH struct {
		Opcode uint8  `json:"opcode"`
		SE     int    `json:"se"`
		MigReq int    `json:"migreq"`
		Pad    uint8  `json:"pad"`
		PKey   uint16 `json:"pkey"`
		FECN   int    `json:"fecn"`
		BECN   int    `json:"becn"`
		DQPN   uint32 `json:"dqpn"`
		AckReq int    `json:"ackreq"`
		PSN    uint32 `json:"psn"`
	} `json:"bth"`
	RETH *struct {
		VA     uint64 `json:"va"`
		RKey   uint32 `json:"rkey"`
		DMALen uint32 `json:"dmalen"`
	} `json:"reth"`
	AETH *struct {
		Syndrome uint8  `json:"syndrome"`
		MSN      uint32 `json:"msn"`
	} `json:"aeth"`
	Imm  *uint32 `json:"imm"`
	IETH *uint32 `json:"ieth"`
	DETH *struct {
		QKey   uint32 `json:"qkey"`
		SrcQPN uint32 `json:"src_qpn"`
	} `json:"deth"`
	Atomic *struct {
		VA      uint64 `json:"va"`
		RKey    uint32 `json:"rkey"`
		SwapAdd uint64 `json:"swap_add"`
		Compare uint64 `json:"compare"`
	} `json:"atomic"`
	AtomicAck *uint64 `json:"atomic_ack"`
	PETH      *struct {
		RecvSN uint32 `json:"recv_sn"`
		Index  uint32 `json:"index"`
	} `json:"peth"`
	RWSN  *uint32 `json:"rwsn"`
	SACK  *uint32 `json:"sack"`
	Holes *struct {
		High  uint32      `json:"high"`
		Holes [][2]uint32 `json:"holes"`
	} `json:"holes"`
	WQEP *struct {
		DriverSeq uint32 `json:"driver_seq"`
		Kind      uint8  `json:"kind"`
		Flags     uint8  `json:"flags"`
		WRID      uint64 `json:"wrid"`
		LocalVA   uint64 `json:"local_va"`
		LocalKey  uint32 `json:"local_key"`
		Length    uint32 `json:"length"`
		RemoteVA  uint64 `json:"remote_va"`
		RemoteKey uint32 `json:"remote_key"`
		Imm       uint32 `json:"imm"`
	} `json:"wqep"`
	CQEP *struct {
		DriverSeq uint32 `json:"driver_seq"`
		Status    uint8  `json:"status"`
		Opcode    uint8  `json:"opcode"`
		Flags     uint8  `json:"flags"`
		ByteLen   uint32 `json:"byte_len"`
		Imm       uint32 `json:"imm"`
	} `json:"cqep"`
	EA *struct {
		Kind      uint8  `json:"kind"`
		DriverSeq uint32 `json:"driver_seq"`
	} `json:"ea"`
	RDP *struct {
		VA    uint64 `json:"va"`
		RKey  uint32 `json:"rkey"`
		Flags uint8  `json:"flags"`
	} `json:"rdp"`
	GD *struct {
		VA     uint64 `json:"va"`
		RKey   uint32 `json:"rkey"`
		Length uint16 `json:"length"`
		MTU    uint8  `json:"mtu"`
		Flags  uint8  `json:"flags"`
	} `json:"gd"`
	SDP *struct {
		Offset uint32 `json:"offset"`
	} `json:"sdp"`
	Payload string `json:"payload"`
	Frame   string `json:"frame"`
	ICRC    uint32 `json:"icrc"`
}

// Load reads the vectors from path (bth/testdata/golden.json, relative to
// the test's package).
func Load(tb testing.TB, path string) []Vector {
	tb.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	var vs []Vector
	if err := json.Unmarshal(data, &vs); err != nil {
		tb.Fatal(err)
	}
	if len(vs) == 0 {
		tb.Fatal("no golden vectors")
	}
	return vs
}
