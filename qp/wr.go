package qp

import "fmt"

// Access is the set of access flags of an MR or a QP (enum ibv_access_flags).
type Access uint32

const (
	AccessLocalWrite   Access = 1 << 0
	AccessRemoteWrite  Access = 1 << 1
	AccessRemoteRead   Access = 1 << 2
	AccessRemoteAtomic Access = 1 << 3

	// AccessDefined is every flag softnic defines; ibv_reg_mr refuses
	// others (EINVAL).
	AccessDefined = AccessLocalWrite | AccessRemoteWrite | AccessRemoteRead | AccessRemoteAtomic
)

// MaxSGE is the most scatter/gather entries one work request carries. A
// fixed array keeps WQEs allocation-free, as a hardware WQE has a fixed
// size.
const MaxSGE = 8

// SGE is one scatter/gather element (struct ibv_sge).
type SGE struct {
	Addr   uint64
	Length uint32
	LKey   uint32
}

// WROpcode is a send work request opcode (enum ibv_wr_opcode).
type WROpcode uint8

const (
	WRRDMAWrite         WROpcode = 0
	WRRDMAWriteWithImm  WROpcode = 1
	WRSend              WROpcode = 2
	WRSendWithImm       WROpcode = 3
	WRRDMARead          WROpcode = 4
	WRAtomicCmpAndSwp   WROpcode = 5
	WRAtomicFetchAndAdd WROpcode = 6
)

var wrNames = [...]string{"RDMA_WRITE", "RDMA_WRITE_WITH_IMM", "SEND", "SEND_WITH_IMM", "RDMA_READ", "ATOMIC_CMP_AND_SWP", "ATOMIC_FETCH_AND_ADD"}

func (o WROpcode) String() string {
	if int(o) < len(wrNames) {
		return wrNames[o]
	}
	return fmt.Sprintf("WROpcode(%d)", uint8(o))
}

// IsAtomic reports whether o is one of the two atomics.
func (o WROpcode) IsAtomic() bool { return o == WRAtomicCmpAndSwp || o == WRAtomicFetchAndAdd }

// SendFlags are enum ibv_send_flags.
type SendFlags uint32

const (
	SendFence     SendFlags = 1 << 0
	SendSignaled  SendFlags = 1 << 1
	SendSolicited SendFlags = 1 << 2
	SendInline    SendFlags = 1 << 3
)

// SendWR is a send work request (struct ibv_send_wr, without the list link:
// callers post a slice).
type SendWR struct {
	WRID       uint64
	Opcode     WROpcode
	Flags      SendFlags
	SGL        [MaxSGE]SGE
	NumSGE     int
	ImmData    uint32 // network-order value of the immediate, as on the wire
	RemoteAddr uint64 // RDMA and atomic target virtual address
	RKey       uint32
	CompareAdd uint64 // atomic: compare value (CMP_AND_SWP) or addend (FETCH_AND_ADD)
	Swap       uint64 // atomic: swap value (CMP_AND_SWP)
	// UD (wr.ud of struct ibv_send_wr): the address handle (the
	// engine's number, AH.Handle), the destination QP and its Q_Key
	// (QKeyUseQP set: the sending QP's own Q_Key). Unused on RC.
	AH         uint32
	RemoteQPN  uint32
	RemoteQKey uint32
}

// SGEs returns the used part of the scatter/gather list.
func (w *SendWR) SGEs() []SGE { return w.SGL[:w.NumSGE] }

// RecvWR is a receive work request (struct ibv_recv_wr).
type RecvWR struct {
	WRID   uint64
	SGL    [MaxSGE]SGE
	NumSGE int
}

// SGEs returns the used part of the scatter/gather list.
func (w *RecvWR) SGEs() []SGE { return w.SGL[:w.NumSGE] }

// WCStatus is a work completion status (enum ibv_wc_status), same values.
type WCStatus uint8

const (
	WCSuccess        WCStatus = 0
	WCLocLenErr      WCStatus = 1
	WCLocQPOpErr     WCStatus = 2
	WCLocEECOpErr    WCStatus = 3
	WCLocProtErr     WCStatus = 4
	WCWRFlushErr     WCStatus = 5
	WCMWBindErr      WCStatus = 6
	WCBadRespErr     WCStatus = 7
	WCLocAccessErr   WCStatus = 8
	WCRemInvReqErr   WCStatus = 9
	WCRemAccessErr   WCStatus = 10
	WCRemOpErr       WCStatus = 11
	WCRetryExcErr    WCStatus = 12
	WCRNRRetryExcErr WCStatus = 13
	WCGeneralErr     WCStatus = 21
)

var wcStatusNames = map[WCStatus]string{
	WCSuccess: "SUCCESS", WCLocLenErr: "LOC_LEN_ERR", WCLocQPOpErr: "LOC_QP_OP_ERR",
	WCLocEECOpErr: "LOC_EEC_OP_ERR", WCLocProtErr: "LOC_PROT_ERR", WCWRFlushErr: "WR_FLUSH_ERR",
	WCMWBindErr: "MW_BIND_ERR", WCBadRespErr: "BAD_RESP_ERR", WCLocAccessErr: "LOC_ACCESS_ERR",
	WCRemInvReqErr: "REM_INV_REQ_ERR", WCRemAccessErr: "REM_ACCESS_ERR", WCRemOpErr: "REM_OP_ERR",
	WCRetryExcErr: "RETRY_EXC_ERR", WCRNRRetryExcErr: "RNR_RETRY_EXC_ERR", WCGeneralErr: "GENERAL_ERR",
}

// String gives the ibverbs name (ibv_wc_status_str without the prose).
func (s WCStatus) String() string {
	if n, ok := wcStatusNames[s]; ok {
		return n
	}
	return fmt.Sprintf("WCStatus(%d)", uint8(s))
}

// WCOpcode is enum ibv_wc_opcode.
type WCOpcode uint8

const (
	WCSend            WCOpcode = 0
	WCRDMAWrite       WCOpcode = 1
	WCRDMARead        WCOpcode = 2
	WCCompSwap        WCOpcode = 3
	WCFetchAdd        WCOpcode = 4
	WCRecv            WCOpcode = 128
	WCRecvRDMAWithImm WCOpcode = 129
)

func (o WCOpcode) String() string {
	switch o {
	case WCSend:
		return "SEND"
	case WCRDMAWrite:
		return "RDMA_WRITE"
	case WCRDMARead:
		return "RDMA_READ"
	case WCCompSwap:
		return "COMP_SWAP"
	case WCFetchAdd:
		return "FETCH_ADD"
	case WCRecv:
		return "RECV"
	case WCRecvRDMAWithImm:
		return "RECV_RDMA_WITH_IMM"
	}
	return fmt.Sprintf("WCOpcode(%d)", uint8(o))
}

// WCFlags are enum ibv_wc_flags.
type WCFlags uint8

const (
	WCWithImm WCFlags = 1 << 1
	WCWithInv WCFlags = 1 << 3
	// WCSolicited marks the receive completion of a message whose last
	// packet carried the BTH solicited-event bit (the sender's
	// IBV_SEND_SOLICITED). ibverbs keeps this bit inside the provider's
	// CQE; softnic shows it in the WC because its completion channels,
	// in the daemon's pump as in the engine, decide from the WC alone
	// whether a solicited-only CQ fires. A softnic extension, in a bit
	// enum ibv_wc_flags leaves free.
	WCSolicited WCFlags = 1 << 7
)

// WC is a work completion (struct ibv_wc).
type WC struct {
	WRID      uint64
	Status    WCStatus
	Opcode    WCOpcode
	VendorErr uint32
	ByteLen   uint32
	ImmData   uint32
	QPNum     uint32
	SrcQP     uint32
	Flags     WCFlags
}

// WCOpcodeFor maps a send opcode to the opcode of its completion.
func WCOpcodeFor(o WROpcode) WCOpcode {
	switch o {
	case WRRDMAWrite, WRRDMAWriteWithImm:
		return WCRDMAWrite
	case WRSend, WRSendWithImm:
		return WCSend
	case WRRDMARead:
		return WCRDMARead
	case WRAtomicCmpAndSwp:
		return WCCompSwap
	case WRAtomicFetchAndAdd:
		return WCFetchAdd
	}
	return WCSend
}
