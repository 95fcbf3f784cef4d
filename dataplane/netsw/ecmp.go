package netsw

import "encoding/binary"

const (
	ipProtoTCP = 6
	ipProtoUDP = 17
)

// FlowHash hashes the frame's flow: for IPv4 and IPv6, the addresses, the
// protocol and, for UDP and TCP, the ports, so RoCEv2's UDP source port
// (the entropy a NIC varies per QP, Annex A17) separates QPs between the
// same hosts; an IPv4 fragment hashes without ports. A frame that is not
// IP hashes its Ethernet addresses and type. seed is mixed in first: give
// each switch its own, or the switches of a multi-tier network make the
// same choice at every tier (hash polarization). Equal fields give equal
// hashes on every machine.
func FlowHash(frame []byte, seed uint64) uint64 {
	h := mix(seed ^ 0x9e3779b97f4a7c15)
	off, v6, ok := ipOffset(frame)
	if !ok {
		if len(frame) < ethHeaderLen {
			return mix(h ^ uint64(len(frame)))
		}
		h = mix(h ^ binary.BigEndian.Uint64(frame[0:8]))
		return mix(h ^ uint64(binary.BigEndian.Uint32(frame[8:12]))<<16 ^ uint64(binary.BigEndian.Uint16(frame[12:14])))
	}
	ip := frame[off:]
	var proto uint8
	l4 := -1
	if v6 {
		for i := 8; i < 40; i += 8 {
			h = mix(h ^ binary.BigEndian.Uint64(ip[i:]))
		}
		proto = ip[6]
		l4 = 40
	} else {
		h = mix(h ^ binary.BigEndian.Uint64(ip[12:20]))
		proto = ip[9]
		if binary.BigEndian.Uint16(ip[6:])&0x3fff == 0 { // not a fragment
			l4 = int(ip[0]&0x0f) * 4
		}
	}
	var ports uint32
	if (proto == ipProtoUDP || proto == ipProtoTCP) && l4 >= 20 && len(ip) >= l4+4 {
		ports = binary.BigEndian.Uint32(ip[l4:])
	}
	return mix(h ^ uint64(proto)<<32 ^ uint64(ports))
}

// mix is the finalizer of splitmix64 (Steele et al., OOPSLA 2014): every
// input bit moves every output bit.
func mix(z uint64) uint64 {
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}

// PickECMP returns one of ports, chosen by the frame's FlowHash with seed:
// the same flow always gets the same port, distinct flows spread evenly.
// ports must not be empty.
func PickECMP(frame []byte, seed uint64, ports []int) int {
	return ports[Spread(FlowHash(frame, seed), len(ports))]
}

// Spread maps a hash to [0, n) by its high bits (Lemire's multiply-shift
// reduction: unbiased to within n/2^32).
func Spread(hash uint64, n int) int {
	return int((hash >> 32) * uint64(n) >> 32)
}
