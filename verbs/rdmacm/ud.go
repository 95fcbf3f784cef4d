package rdmacm

import (
	"syscall"

	"github.com/softnic/softnic/qp"
	"github.com/softnic/softnic/verbs"
)

// UD ids (RDMA_PS_UDP), as Linux's rdma_cm runs them: no connection,
// only service ID resolution (SIDR, the Service's Resolve). rdma_connect
// sends a SIDR_REQ for the destination's port carrying the RDMA IP CM
// header and the program's private data; the passive side's listener
// gets CONNECT_REQUEST with a new id, and rdma_accept answers with a
// SIDR_REP naming the id's UD QP and RDMA_UDP_QKEY (rdma_reject: status
// 2, rejected). The active side then gets ESTABLISHED with the peer's
// QPN and Q_Key (rdma_ud_param; the address handle's attributes are the
// id's path), or UNREACHABLE with the SIDR_REP's status (1: nobody
// listens on the port) or -ETIMEDOUT. A UD id's QP is in RTS from
// rdma_create_qp on, with Q_Key RDMA_UDP_QKEY (librdmacm's
// ucma_init_ud_qp).

// udQPAttr is rdma_init_qp_attr for a UD id's QP.
func (id *ID) udQPAttr(state qp.State) (verbs.QPAttr, verbs.AttrMask, error) {
	a := verbs.QPAttr{State: state}
	switch state {
	case qp.Init:
		a.PKeyIndex, a.Port, a.QKey = 0, 1, UDPQKey
		return a, verbs.AttrState | verbs.AttrPKeyIndex | verbs.AttrPort | verbs.AttrQKey, nil
	case qp.RTR:
		return a, verbs.AttrState, nil
	case qp.RTS:
		return a, verbs.AttrState | verbs.AttrSQPSN, nil
	}
	return a, 0, syscall.EINVAL
}

// resolveUD is rdma_connect on a UD id: the SIDR_REQ.
func (id *ID) resolveUD(p UserParam) error {
	if len(p.PrivateData) > MaxUDReqPrivate {
		return syscall.EINVAL
	}
	svc := id.cm.service()
	id.mu.Lock()
	if id.state != StateRouteResolved {
		id.mu.Unlock()
		return syscall.EINVAL
	}
	if id.ps != PSUDP {
		id.mu.Unlock()
		return syscall.EOPNOTSUPP // IPoIB's Q_Key comes from an SA
	}
	if svc == nil {
		id.mu.Unlock()
		return syscall.ENOSYS
	}
	pdata := appendHeader(nil, id.src, id.dst, p.PrivateData)
	return id.sendRequest(func(sid uint64, path Path) (Conn, error) { return svc.Resolve(sid, path, pdata, id.handle) })
}

// acceptUD is rdma_accept on a UD CONNECT_REQUEST's id: the SIDR_REP
// with the id's QP (or the parameter's QPN) and RDMA_UDP_QKEY.
func (id *ID) acceptUD(p UserParam) error {
	if len(p.PrivateData) > MaxUDRepPrivate {
		return syscall.EINVAL
	}
	id.mu.Lock()
	if id.state != StateConnect || id.conn == nil || id.parent == nil || id.answered {
		id.mu.Unlock()
		return syscall.EINVAL
	}
	qpn := p.QPN
	if id.qp != nil {
		qpn = id.qp.QPN()
	}
	if qpn == 0 {
		id.mu.Unlock()
		return syscall.EINVAL
	}
	id.answered = true
	conn := id.conn
	id.mu.Unlock()
	err := conn.Accept(ConnParam{QPN: qpn, QKey: UDPQKey, PrivateData: p.PrivateData}, id.handle)
	id.donePending()
	return err
}
