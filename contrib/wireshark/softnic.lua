-- softnic.lua: a Wireshark dissector for softnic's RoCEv2 extensions
-- (docs/wire.md): the out-of-order opcodes 0xC0-0xCB (SENDs with their
-- PETH, WRITEs with a RETH on every packet and the RWSNETH on the last of
-- a WRITE with immediate),
-- the acknowledgements 0xD1-0xD4 (SACKETH, FNACK, HolesETH) and StaR's
-- stateless packets 0xE0-0xE6 (WQEPETH, CQEPETH, EAETH, RDPETH, AETH,
-- GDETH, SDPETH). Wireshark's InfiniBand dissector stops at these vendor
-- opcodes; this one takes UDP port 4791, decodes softnic's opcodes field
-- by field down to the payload and the ICRC (which it checks), and hands
-- every other frame to the InfiniBand dissector unchanged.
--
--   tshark -X lua_script:contrib/wireshark/softnic.lua -r softnic.pcap -V
--   wireshark -X lua_script:contrib/wireshark/softnic.lua softnic.pcap
--
-- or copy it to ~/.local/lib/wireshark/plugins/. Display filters: softnic,
-- softnic.bth.opcode == 0xd1, softnic.sack.psn, softnic.icrc.status == 1 ...

local p = Proto("softnic", "softnic RoCEv2 extensions")

local opnames = {
	[0xC0] = "RC_SEND_FIRST_OOO", [0xC1] = "RC_SEND_MIDDLE_OOO", [0xC2] = "RC_SEND_LAST_OOO",
	[0xC3] = "RC_SEND_LAST_WITH_IMMEDIATE_OOO", [0xC4] = "RC_SEND_ONLY_OOO",
	[0xC5] = "RC_SEND_ONLY_WITH_IMMEDIATE_OOO", [0xC6] = "RC_RDMA_WRITE_FIRST_OOO",
	[0xC7] = "RC_RDMA_WRITE_MIDDLE_OOO", [0xC8] = "RC_RDMA_WRITE_LAST_OOO",
	[0xC9] = "RC_RDMA_WRITE_LAST_WITH_IMMEDIATE_OOO", [0xCA] = "RC_RDMA_WRITE_ONLY_OOO",
	[0xCB] = "RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE_OOO",
	[0xD1] = "RC_ACKNOWLEDGE_SACK", [0xD2] = "RC_ACKNOWLEDGE_SACK_OVERFLOW",
	[0xD3] = "RC_ACKNOWLEDGE_FNAK", [0xD4] = "RC_ACKNOWLEDGE_HOLES",
	[0xE0] = "STAR_WQEP", [0xE1] = "STAR_CQEP", [0xE2] = "STAR_EA", [0xE3] = "STAR_RDP",
	[0xE4] = "STAR_RA", [0xE5] = "STAR_GD", [0xE6] = "STAR_SDP",
}

-- Headers after the BTH, in order, and whether a payload follows
-- (bth/opcode.go's table for these opcodes).
local layout = {}
for op = 0xC0, 0xCB do
	local base = op - 0xC0
	local h = {}
	if base >= 6 then h[#h + 1] = "reth" end -- every WRITE packet carries a RETH
	if base == 0x03 or base == 0x05 or base == 0x09 or base == 0x0B then h[#h + 1] = "imm" end
	if base < 6 then h[#h + 1] = "peth" end -- SENDs only
	if base == 0x09 or base == 0x0B then h[#h + 1] = "rwsn" end -- last of a WRITE with immediate
	layout[op] = { headers = h, payload = true }
end
for _, op in ipairs({ 0xD1, 0xD2, 0xD3 }) do layout[op] = { headers = { "aeth", "sack" } } end
layout[0xD4] = { headers = { "aeth", "holes" } }
layout[0xE0] = { headers = { "wqep" } }
layout[0xE1] = { headers = { "cqep" } }
layout[0xE2] = { headers = { "ea" } }
layout[0xE3] = { headers = { "rdp" }, payload = true }
layout[0xE4] = { headers = { "aeth" } }
layout[0xE5] = { headers = { "gd" } }
layout[0xE6] = { headers = { "sdp" }, payload = true }

local hlen = { reth = 16, imm = 4, aeth = 4, peth = 6, rwsn = 3, sack = 4, holes = 16,
	wqep = 48, cqep = 16, ea = 8, rdp = 13, gd = 16, sdp = 4 }

local wqep_kinds = { [1] = "RECV", [2] = "SEND", [3] = "RDMA_WRITE", [4] = "RDMA_WRITE_WITH_IMM",
	[5] = "RDMA_READ", [6] = "SEND_WITH_IMM", [16] = "MR_REG", [17] = "MR_DEREG" }
local wc_status = { [0] = "SUCCESS", [1] = "LOC_LEN_ERR", [2] = "LOC_QP_OP_ERR", [4] = "LOC_PROT_ERR",
	[5] = "WR_FLUSH_ERR", [9] = "REM_INV_REQ_ERR", [10] = "REM_ACCESS_ERR", [11] = "REM_OP_ERR",
	[12] = "RETRY_EXC_ERR", [13] = "RNR_RETRY_EXC_ERR", [21] = "GENERAL_ERR" }
local wc_opcode = { [0] = "SEND", [1] = "RDMA_WRITE", [2] = "RDMA_READ", [3] = "COMP_SWAP",
	[4] = "FETCH_ADD", [128] = "RECV", [129] = "RECV_RDMA_WITH_IMM" }
local ea_kinds = { [0] = "WQEP", [1] = "CQEP", [2] = "WQEPs up to" }
local mtus = { [1] = "256", [2] = "512", [3] = "1024", [4] = "2048", [5] = "4096" }
local icrc_status = { [0] = "Bad", [1] = "Good" }

local F = ProtoField
local f = {
	opcode = F.uint8("softnic.bth.opcode", "Opcode", base.HEX, opnames),
	se = F.bool("softnic.bth.se", "Solicited Event", 8, nil, 0x80),
	migreq = F.bool("softnic.bth.migreq", "MigReq", 8, nil, 0x40),
	pad = F.uint8("softnic.bth.pad", "Pad Count", base.DEC, nil, 0x30),
	tver = F.uint8("softnic.bth.tver", "Header Version", base.DEC, nil, 0x0F),
	pkey = F.uint16("softnic.bth.pkey", "Partition Key", base.HEX),
	fecn = F.bool("softnic.bth.fecn", "FECN", 8, nil, 0x80),
	becn = F.bool("softnic.bth.becn", "BECN", 8, nil, 0x40),
	resv6 = F.uint8("softnic.bth.reserved", "Reserved", base.HEX, nil, 0x3F),
	dqpn = F.uint24("softnic.bth.dqpn", "Destination Queue Pair", base.HEX),
	ackreq = F.bool("softnic.bth.ackreq", "Acknowledge Request", 8, nil, 0x80),
	resv7 = F.uint8("softnic.bth.reserved7", "Reserved", base.HEX, nil, 0x7F),
	psn = F.uint24("softnic.bth.psn", "Packet Sequence Number", base.HEX),

	reth_va = F.uint64("softnic.reth.va", "Virtual Address", base.HEX),
	reth_rkey = F.uint32("softnic.reth.rkey", "Remote Key", base.HEX),
	reth_len = F.uint32("softnic.reth.dmalen", "DMA Length", base.DEC),
	reth_off = F.uint32("softnic.reth.offset", "Offset (DMA Length - payload)", base.DEC),
	imm = F.uint32("softnic.immdt", "Immediate Data", base.HEX),
	aeth_syndrome = F.uint8("softnic.aeth.syndrome", "Syndrome", base.HEX),
	aeth_msn = F.uint24("softnic.aeth.msn", "Message Sequence Number", base.HEX),

	peth_wqesn = F.uint24("softnic.peth.wqesn", "Receive WQE Sequence Number", base.HEX),
	peth_index = F.uint24("softnic.peth.index", "Packet Index (offset = index x path MTU)", base.DEC),
	rwsn_wqesn = F.uint24("softnic.rwsn.wqesn", "Receive WQE Sequence Number", base.HEX),

	sack_lostcnt = F.uint8("softnic.sack.lostcnt", "Lost Count", base.DEC, nil, 0x07),
	sack_resv = F.uint8("softnic.sack.reserved", "Reserved", base.HEX, nil, 0xF8),
	sack_psn = F.uint24("softnic.sack.psn", "Selectively Acknowledged PSN", base.HEX),

	holes_resv = F.uint8("softnic.holes.reserved", "Reserved", base.HEX),
	holes_high = F.uint24("softnic.holes.rcvhigh", "RCV.HIGH", base.HEX),
	hole_offset = F.uint16("softnic.holes.offset", "Hole Offset", base.HEX),
	hole_length = F.uint16("softnic.holes.length", "Hole Length", base.DEC),
	hole_first = F.uint24("softnic.holes.first", "Hole First PSN", base.HEX),

	wqep_seq = F.uint32("softnic.wqep.driverseq", "Driver Sequence", base.DEC),
	wqep_kind = F.uint8("softnic.wqep.kind", "Kind", base.DEC, wqep_kinds),
	wqep_flags = F.uint8("softnic.wqep.flags", "Flags", base.HEX),
	wqep_signaled = F.bool("softnic.wqep.flags.signaled", "Signaled", 8, nil, 0x01),
	wqep_solicited = F.bool("softnic.wqep.flags.solicited", "Solicited", 8, nil, 0x02),
	wqep_rwrite = F.bool("softnic.wqep.flags.remote_write", "Remote Write", 8, nil, 0x04),
	wqep_rread = F.bool("softnic.wqep.flags.remote_read", "Remote Read", 8, nil, 0x08),
	wqep_ratomic = F.bool("softnic.wqep.flags.remote_atomic", "Remote Atomic", 8, nil, 0x10),
	wqep_tabledone = F.bool("softnic.wqep.flags.table_done", "Table Done", 8, nil, 0x20),
	wqep_resv = F.uint16("softnic.wqep.reserved", "Reserved", base.HEX),
	wqep_wrid = F.uint64("softnic.wqep.wrid", "WRID", base.HEX),
	wqep_lva = F.uint64("softnic.wqep.localva", "Local VA", base.HEX),
	wqep_lkey = F.uint32("softnic.wqep.localkey", "Local Key", base.HEX),
	wqep_len = F.uint32("softnic.wqep.length", "Length", base.DEC),
	wqep_rva = F.uint64("softnic.wqep.remoteva", "Remote VA", base.HEX),
	wqep_rkey = F.uint32("softnic.wqep.remotekey", "Remote Key", base.HEX),
	wqep_imm = F.uint32("softnic.wqep.imm", "Immediate Data", base.HEX),

	cqep_seq = F.uint32("softnic.cqep.driverseq", "Driver Sequence", base.DEC),
	cqep_status = F.uint8("softnic.cqep.status", "Status", base.DEC, wc_status),
	cqep_opcode = F.uint8("softnic.cqep.opcode", "Opcode", base.DEC, wc_opcode),
	cqep_flags = F.uint8("softnic.cqep.flags", "Flags", base.HEX),
	cqep_withimm = F.bool("softnic.cqep.flags.with_imm", "With Immediate", 8, nil, 0x01),
	cqep_resv = F.uint8("softnic.cqep.reserved", "Reserved", base.HEX),
	cqep_bytelen = F.uint32("softnic.cqep.bytelen", "Byte Length", base.DEC),
	cqep_imm = F.uint32("softnic.cqep.imm", "Immediate Data", base.HEX),

	ea_kind = F.uint8("softnic.ea.kind", "Kind", base.DEC, ea_kinds),
	ea_resv = F.uint24("softnic.ea.reserved", "Reserved", base.HEX),
	ea_seq = F.uint32("softnic.ea.driverseq", "Driver Sequence", base.DEC),

	rdp_va = F.uint64("softnic.rdp.va", "Virtual Address", base.HEX),
	rdp_rkey = F.uint32("softnic.rdp.rkey", "Remote Key", base.HEX),
	rdp_flags = F.uint8("softnic.rdp.flags", "Flags", base.HEX),
	rdp_last = F.bool("softnic.rdp.flags.last", "Last", 8, nil, 0x01),
	rdp_to_recv = F.bool("softnic.rdp.flags.to_recv", "To a RECV's buffer", 8, nil, 0x02),

	gd_va = F.uint64("softnic.gd.va", "Virtual Address", base.HEX),
	gd_rkey = F.uint32("softnic.gd.rkey", "Remote Key", base.HEX),
	gd_len = F.uint16("softnic.gd.length", "Length", base.DEC),
	gd_mtu = F.uint8("softnic.gd.mtu", "MTU", base.DEC, mtus),
	gd_flags = F.uint8("softnic.gd.flags", "Flags", base.HEX),
	gd_from_send = F.bool("softnic.gd.flags.from_send", "From a SEND's buffer", 8, nil, 0x01),

	sdp_offset = F.uint32("softnic.sdp.offset", "Offset", base.DEC),

	payload = F.bytes("softnic.payload", "Payload"),
	padding = F.bytes("softnic.padding", "Pad Bytes"),
	icrc = F.uint32("softnic.icrc", "Invariant CRC", base.HEX),
	icrc_calc = F.uint32("softnic.icrc.calculated", "Calculated ICRC", base.HEX),
	icrc_status = F.uint8("softnic.icrc.status", "ICRC Status", base.DEC, icrc_status),
}
local fl = {}
for _, v in pairs(f) do fl[#fl + 1] = v end
p.fields = fl

local e_short = ProtoExpert.new("softnic.short", "Packet too short for its headers", expert.group.MALFORMED, expert.severity.ERROR)
local e_icrc = ProtoExpert.new("softnic.icrc.bad", "Bad ICRC", expert.group.CHECKSUM, expert.severity.ERROR)
p.experts = { e_short, e_icrc }

-- CRC-32 (IEEE 802.3, reflected, as the ICRC: IBA 7.8.1, Annex A17.4).
local crctab = {}
for i = 0, 255 do
	local c = i
	for _ = 1, 8 do
		if bit32.band(c, 1) ~= 0 then c = bit32.bxor(0xEDB88320, bit32.rshift(c, 1)) else c = bit32.rshift(c, 1) end
	end
	crctab[i] = c
end
local function crc_update(c, bytes)
	for i = 1, #bytes do
		c = bit32.bxor(crctab[bit32.band(bit32.bxor(c, bytes:byte(i)), 0xFF)], bit32.rshift(c, 8))
	end
	return c
end

-- icrc computes the ICRC of the RoCEv2 packet in roce (BTH .. before the
-- ICRC) over its IP and UDP headers (Annex A17.4: eight bytes of ones,
-- then the IP header with the variant fields masked, the UDP header with
-- the checksum masked, the BTH with byte 4 masked).
local function icrc(iphdr, udphdr, roce, v6)
	local ip = { iphdr:byte(1, -1) }
	if v6 then
		ip[1] = bit32.bor(ip[1], 0x0F) -- traffic class
		ip[2], ip[3], ip[4] = 0xFF, 0xFF, 0xFF -- traffic class and flow label
		ip[8] = 0xFF -- hop limit
	else
		ip[2] = 0xFF -- type of service
		ip[9] = 0xFF -- TTL
		ip[11], ip[12] = 0xFF, 0xFF -- header checksum
	end
	local udp = { udphdr:byte(1, -1) }
	udp[7], udp[8] = 0xFF, 0xFF
	local b = { roce:byte(1, -1) }
	b[5] = 0xFF
	local c = 0xFFFFFFFF
	c = crc_update(c, string.char(0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF))
	c = crc_update(c, string.char(table.unpack(ip)))
	c = crc_update(c, string.char(table.unpack(udp)))
	local chunk = 4096
	for i = 1, #b, chunk do
		c = crc_update(c, string.char(table.unpack(b, i, math.min(i + chunk - 1, #b))))
	end
	return bit32.bnot(c)
end

local ip_hdr_f = Field.new("ip")
local ipv6_hdr_f = Field.new("ipv6")
local udp_f = Field.new("udp")

local ib = DissectorTable.get("udp.port"):get_dissector(4791)

local function bytes_of(tvb, off, n)
	return tvb:raw(off, n)
end

local dissect_header = {}
dissect_header.reth = function(t, tvb, o, psn, payload_len, pinfo, op)
	local base = op - 0xC0
	local first = base == 0x06 or base == 0x0A or base == 0x0B
	local s = t:add(tvb(o, 16), first and "RETH - RDMA Extended Transport Header (the message's)"
		or "RETH - RDMA Extended Transport Header (DMA length: the message up to this packet's end)")
	s:add(f.reth_va, tvb(o, 8)); s:add(f.reth_rkey, tvb(o + 8, 4)); s:add(f.reth_len, tvb(o + 12, 4))
	if not first and payload_len >= 0 then
		-- A MIDDLE or LAST is placed at DMA length - payload.
		s:add(f.reth_off, tvb(o + 12, 4), tvb(o + 12, 4):uint() - payload_len):set_generated()
	end
end
dissect_header.imm = function(t, tvb, o)
	t:add(tvb(o, 4), "ImmDt - Immediate Data"):add(f.imm, tvb(o, 4))
end
dissect_header.aeth = function(t, tvb, o)
	local s = t:add(tvb(o, 4), "AETH - ACK Extended Transport Header")
	s:add(f.aeth_syndrome, tvb(o, 1)); s:add(f.aeth_msn, tvb(o + 1, 3))
end
dissect_header.peth = function(t, tvb, o)
	local s = t:add(tvb(o, 6), "PETH - Placement Extended Transport Header")
	s:add(f.peth_wqesn, tvb(o, 3)); s:add(f.peth_index, tvb(o + 3, 3))
end
dissect_header.rwsn = function(t, tvb, o)
	t:add(tvb(o, 3), "RWSNETH - Receive WQE SN Extended Transport Header"):add(f.rwsn_wqesn, tvb(o, 3))
end
dissect_header.sack = function(t, tvb, o)
	local s = t:add(tvb(o, 4), "SACKETH - Selective Acknowledgement Extended Transport Header")
	s:add(f.sack_lostcnt, tvb(o, 1)); s:add(f.sack_resv, tvb(o, 1)); s:add(f.sack_psn, tvb(o + 1, 3))
end
dissect_header.holes = function(t, tvb, o, psn)
	local s = t:add(tvb(o, 16), "HolesETH - Holes Extended Transport Header")
	s:add(f.holes_resv, tvb(o, 1)); s:add(f.holes_high, tvb(o + 1, 3))
	for i = 0, 2 do
		local ho = o + 4 + 4 * i
		local off, len = tvb(ho, 2):uint(), tvb(ho + 2, 2):uint()
		local label = (i == 0 and " (most recent)") or (i == 2 and " (oldest)") or ""
		local h = s:add(tvb(ho, 4), string.format("Hole %d%s%s", i, label, len == 0 and ": unused" or ""))
		h:add(f.hole_offset, tvb(ho, 2)); h:add(f.hole_length, tvb(ho + 2, 2))
		if len > 0 then
			h:add(f.hole_first, tvb(ho, 2), bit32.band(psn + off, 0xFFFFFF)):set_generated()
		end
	end
end
dissect_header.wqep = function(t, tvb, o)
	local s = t:add(tvb(o, 48), "WQEPETH - StaR Work Request Push")
	s:add(f.wqep_seq, tvb(o, 4)); s:add(f.wqep_kind, tvb(o + 4, 1))
	local fs = s:add(f.wqep_flags, tvb(o + 5, 1))
	fs:add(f.wqep_signaled, tvb(o + 5, 1)); fs:add(f.wqep_solicited, tvb(o + 5, 1))
	fs:add(f.wqep_rwrite, tvb(o + 5, 1)); fs:add(f.wqep_rread, tvb(o + 5, 1))
	fs:add(f.wqep_ratomic, tvb(o + 5, 1)); fs:add(f.wqep_tabledone, tvb(o + 5, 1))
	s:add(f.wqep_resv, tvb(o + 6, 2)); s:add(f.wqep_wrid, tvb(o + 8, 8))
	s:add(f.wqep_lva, tvb(o + 16, 8)); s:add(f.wqep_lkey, tvb(o + 24, 4)); s:add(f.wqep_len, tvb(o + 28, 4))
	s:add(f.wqep_rva, tvb(o + 32, 8)); s:add(f.wqep_rkey, tvb(o + 40, 4)); s:add(f.wqep_imm, tvb(o + 44, 4))
end
dissect_header.cqep = function(t, tvb, o)
	local s = t:add(tvb(o, 16), "CQEPETH - StaR Completion Push")
	s:add(f.cqep_seq, tvb(o, 4)); s:add(f.cqep_status, tvb(o + 4, 1)); s:add(f.cqep_opcode, tvb(o + 5, 1))
	s:add(f.cqep_flags, tvb(o + 6, 1)):add(f.cqep_withimm, tvb(o + 6, 1))
	s:add(f.cqep_resv, tvb(o + 7, 1)); s:add(f.cqep_bytelen, tvb(o + 8, 4)); s:add(f.cqep_imm, tvb(o + 12, 4))
end
dissect_header.ea = function(t, tvb, o)
	local s = t:add(tvb(o, 8), "EAETH - StaR Element ACK")
	s:add(f.ea_kind, tvb(o, 1)); s:add(f.ea_resv, tvb(o + 1, 3)); s:add(f.ea_seq, tvb(o + 4, 4))
end
-- An RDP's and a GD's BTH DestQP is the client's QP, where the answers go.
dissect_header.rdp = function(t, tvb, o)
	local s = t:add(tvb(o, 13), "RDPETH - StaR Receiving Data Packet")
	s:add(f.rdp_va, tvb(o, 8)); s:add(f.rdp_rkey, tvb(o + 8, 4))
	local fl = s:add(f.rdp_flags, tvb(o + 12, 1))
	fl:add(f.rdp_last, tvb(o + 12, 1)); fl:add(f.rdp_to_recv, tvb(o + 12, 1))
end
dissect_header.gd = function(t, tvb, o)
	local s = t:add(tvb(o, 16), "GDETH - StaR Get Data")
	s:add(f.gd_va, tvb(o, 8)); s:add(f.gd_rkey, tvb(o + 8, 4)); s:add(f.gd_len, tvb(o + 12, 2))
	s:add(f.gd_mtu, tvb(o + 14, 1)); s:add(f.gd_flags, tvb(o + 15, 1)):add(f.gd_from_send, tvb(o + 15, 1))
end
dissect_header.sdp = function(t, tvb, o)
	t:add(tvb(o, 4), "SDPETH - StaR Sending Data Packet"):add(f.sdp_offset, tvb(o, 4))
end

function p.dissector(tvb, pinfo, tree)
	if tvb:len() < 1 then return 0 end
	local op = tvb(0, 1):uint()
	local lay = layout[op]
	if lay == nil then
		-- Not softnic's: Wireshark's InfiniBand dissector, as without this
		-- script (its own exceptions, such as a heuristic's Malformed
		-- Packet, stay its own and are not turned into a Lua error).
		local ok, n = pcall(ib.call, ib, tvb, pinfo, tree)
		if ok then return n end
		return tvb:len()
	end
	pinfo.cols.protocol = "softnic"
	local t = tree:add(p, tvb(), "softnic RoCEv2: " .. opnames[op])
	local need = 12 + 4
	for _, h in ipairs(lay.headers) do need = need + hlen[h] end
	if tvb:len() < need then
		t:add_proto_expert_info(e_short, string.format("%d bytes, %s needs %d", tvb:len(), opnames[op], need))
		return tvb:len()
	end
	local b = t:add(tvb(0, 12), "Base Transport Header")
	b:add(f.opcode, tvb(0, 1)); b:add(f.se, tvb(1, 1)); b:add(f.migreq, tvb(1, 1))
	b:add(f.pad, tvb(1, 1)); b:add(f.tver, tvb(1, 1)); b:add(f.pkey, tvb(2, 2))
	b:add(f.fecn, tvb(4, 1)); b:add(f.becn, tvb(4, 1)); b:add(f.resv6, tvb(4, 1))
	b:add(f.dqpn, tvb(5, 3)); b:add(f.ackreq, tvb(8, 1)); b:add(f.resv7, tvb(8, 1))
	b:add(f.psn, tvb(9, 3))
	local psn = tvb(9, 3):uint()
	local padcnt = bit32.rshift(bit32.band(tvb(1, 1):uint(), 0x30), 4)
	local icrc_off = tvb:len() - 4
	local o = 12
	local payload_len = icrc_off - need + 4 - padcnt
	if not lay.payload then payload_len = 0 end
	for _, h in ipairs(lay.headers) do
		dissect_header[h](t, tvb, o, psn, payload_len, pinfo, op)
		o = o + hlen[h]
	end
	if lay.payload then
		if payload_len < 0 then
			t:add_proto_expert_info(e_short, "pad count longer than the payload")
			return tvb:len()
		end
		if payload_len > 0 then t:add(f.payload, tvb(o, payload_len)) end
		if padcnt > 0 then t:add(f.padding, tvb(o + payload_len, padcnt)) end
		o = o + payload_len + padcnt
	end
	if o ~= icrc_off then
		t:add_proto_expert_info(e_short, string.format("%d bytes between the headers and the ICRC", icrc_off - o))
	end
	local ci = t:add_le(f.icrc, tvb(icrc_off, 4)) -- sent least significant byte first
	local got = tvb(icrc_off, 4):le_uint()
	-- The ICRC is checked when the IP and UDP headers are at hand.
	local ipf, udpf = ipv6_hdr_f(), udp_f()
	local v6 = ipf ~= nil
	if not v6 then ipf = ip_hdr_f() end
	if ipf ~= nil and udpf ~= nil then
		local iprange, udprange = ipf.range, udpf.range
		local iphdr = v6 and iprange:raw(0, 40) or iprange:raw(0, bit32.band(iprange(0, 1):uint(), 0x0F) * 4)
		local want = icrc(iphdr, udprange:raw(0, 8), bytes_of(tvb, 0, icrc_off), v6)
		ci:add_le(f.icrc_calc, tvb(icrc_off, 4), want):set_generated()
		local ok = want == got
		local si = ci:add_le(f.icrc_status, tvb(icrc_off, 4), ok and 1 or 0)
		si:set_generated()
		if not ok then si:add_proto_expert_info(e_icrc) end
	end
	pinfo.cols.info = string.format("%s QP=0x%06x PSN=%d", opnames[op], tvb(5, 3):uint(), psn)
	return tvb:len()
end

DissectorTable.get("udp.port"):add(4791, p)
