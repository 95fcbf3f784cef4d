//go:build ignore

// gen reads the exports of rdma-core's libibverbs.so.1 (names, version
// nodes, default or not) and writes what the drop-in library needs to
// export the same: symbols.txt (the list, which TestIbverbsSymbols also
// checks against the system's library), libibverbs.map (the linker's
// version script) and stubs_gen.c (a failing definition of every symbol
// verbs.c does not implement, and the .symver aliases of the old
// versions). Run it with go generate -tags ibverbs ./ibverbs/ on a host
// with rdma-core's libibverbs1.
package main

import (
	"bytes"
	"debug/elf"
	"fmt"
	"log"
	"os"
	"sort"
	"strings"
)

// implemented are the names verbs.c defines under their default version.
var implemented = map[string]bool{}

func init() {
	for _, n := range strings.Fields(`
		ibv_get_device_list ibv_free_device_list ibv_get_device_name ibv_get_device_guid ibv_get_device_index
		ibv_open_device ibv_close_device ibv_query_device ibv_query_port ibv_query_gid _ibv_query_gid_ex
		_ibv_query_gid_table ibv_query_gid_type ibv_query_pkey ibv_get_pkey_index ibv_alloc_pd ibv_dealloc_pd
		ibv_reg_mr ibv_reg_mr_iova ibv_reg_mr_iova2 ibv_dereg_mr ibv_create_comp_channel
		ibv_destroy_comp_channel ibv_create_cq ibv_destroy_cq ibv_get_cq_event ibv_ack_cq_events
		ibv_create_qp ibv_modify_qp ibv_query_qp ibv_destroy_qp ibv_fork_init ibv_is_fork_initialized
		ibv_dontfork_range ibv_dofork_range ibv_wc_status_str ibv_node_type_str ibv_port_state_str
		ibv_event_type_str ibv_get_async_event ibv_ack_async_event ibv_create_ah ibv_destroy_ah
		ibv_create_srq ibv_modify_srq ibv_query_srq ibv_destroy_srq ibv_init_ah_from_wc ibv_create_ah_from_wc`) {
		implemented[n] = true
	}
}

// Stubs: how a symbol verbs.c does not implement fails. ibverbs' calls
// return a pointer (NULL and errno), nothing, -1 and errno, or the error
// number itself (the default).
var (
	retNULL = set(`ibv_create_ah ibv_create_ah_from_wc ibv_create_srq ibv_import_device ibv_import_dm
		ibv_import_mr ibv_import_pd ibv_reg_dmabuf_mr ibv_qp_to_qp_ex _verbs_init_and_alloc_context
		verbs_open_device ibv_get_sysfs_path`)
	retVoid = set(`ibv_unimport_dm ibv_unimport_mr ibv_unimport_pd verbs_register_driver_34
		verbs_set_ops verbs_uninit_context verbs_init_cq __verbs_log ibv_copy_ah_attr_from_kern
		ibv_copy_path_rec_from_kern ibv_copy_path_rec_to_kern ibv_copy_qp_attr_from_kern ibv_register_driver`)
	retMinus1 = set(`ibv_read_sysfs_file ibv_read_ibdev_sysfs_file ibv_rate_to_mult mult_to_ibv_rate
		ibv_rate_to_mbps mbps_to_ibv_rate`)
	retZero = set(`ibv_query_qp_data_in_order __ioctl_final_num_attrs`)
)

// private are the functions of softnic's private interface to the
// drop-in librdmacm (snic_cm.h, rdmacm.go), exported under a node of
// their own, SOFTNIC_PRIVATE_1, and nothing else beyond rdma-core's
// exports (TestIbverbsSymbols).
const privateNode = "SOFTNIC_PRIVATE_1"

var private = strings.Fields(`
	snic_cm_channel_create snic_cm_channel_destroy snic_cm_get_event snic_cm_ack_event
	snic_cm_create_id snic_cm_destroy_id snic_cm_set_user snic_cm_migrate snic_cm_bind snic_cm_resolve_addr
	snic_cm_resolve_route snic_cm_query snic_cm_attach_qp snic_cm_detach_qp snic_cm_init_qp_attr
	snic_cm_connect snic_cm_listen snic_cm_accept snic_cm_reject snic_cm_establish snic_cm_notify
	snic_cm_disconnect snic_cm_set_option snic_cm_set_device`)

func set(s string) map[string]bool {
	m := map[string]bool{}
	for _, n := range strings.Fields(s) {
		m[n] = true
	}
	return m
}

type sym struct {
	name, version, kind string
	def                 bool
}

func main() {
	lib := "/usr/lib/x86_64-linux-gnu/libibverbs.so.1"
	if len(os.Args) > 1 {
		lib = os.Args[1]
	}
	f, err := elf.Open(lib)
	if err != nil {
		log.Fatal(err)
	}
	ds, err := f.DynamicSymbols()
	if err != nil {
		log.Fatal(err)
	}
	var syms []sym
	nodes := map[string]bool{}
	for _, s := range ds {
		if s.Section == elf.SHN_UNDEF || s.Version == "" {
			continue
		}
		t := elf.ST_TYPE(s.Info)
		if s.Section == elf.SHN_ABS && s.Name == s.Version {
			nodes[s.Version] = true // the version node's own symbol
			continue
		}
		kind := "FUNC"
		if t == elf.STT_OBJECT {
			kind = "OBJECT"
		}
		nodes[s.Version] = true
		syms = append(syms, sym{name: s.Name, version: s.Version, kind: kind, def: !s.VersionIndex.IsHidden()})
	}
	sort.Slice(syms, func(i, j int) bool {
		if syms[i].name != syms[j].name {
			return syms[i].name < syms[j].name
		}
		return syms[i].version < syms[j].version
	})
	var list, script, stubs, vers bytes.Buffer
	fmt.Fprintf(&list, "# The exports of rdma-core's %s (go generate -tags ibverbs ./ibverbs/):\n# name version default|compat kind\n", lib)
	for _, s := range syms {
		d := "default"
		if !s.def {
			d = "compat"
		}
		fmt.Fprintf(&list, "%s %s %s %s\n", s.name, s.version, d, s.kind)
	}

	// The version nodes in order, each inheriting the one before, as
	// rdma-core's libibverbs.map does.
	order := []string{}
	for n := range nodes {
		order = append(order, n)
	}
	sort.Slice(order, func(i, j int) bool { return nodeKey(order[i]) < nodeKey(order[j]) })
	fmt.Fprintf(&script, "/* Generated by gen.go from %s: the version nodes and default-version\n   exports of rdma-core's libibverbs. */\n", lib)
	prev := ""
	for i, n := range order {
		fmt.Fprintf(&script, "%s {\n", n)
		globals := []string{}
		for _, s := range syms {
			// Old versions are listed too: the .symver aliases of
			// stubs_gen.c are matched by name, as in rdma-core's map.
			if s.version == n && s.kind == "FUNC" || s.version == n && s.def {
				globals = append(globals, s.name)
			}
		}
		if len(globals) > 0 {
			fmt.Fprintf(&script, "\tglobal:\n")
			for _, g := range globals {
				fmt.Fprintf(&script, "\t\t%s;\n", g)
			}
		}
		if i == 0 {
			fmt.Fprintf(&script, "\tlocal: *;\n")
		}
		if prev != "" && !strings.HasPrefix(n, "IBVERBS_PRIVATE") {
			fmt.Fprintf(&script, "} %s;\n", prev)
		} else {
			fmt.Fprintf(&script, "};\n")
		}
		prev = n
	}
	fmt.Fprintf(&script, "/* softnic's private interface to its drop-in librdmacm (snic_cm.h). */\n%s {\n\tglobal:\n", privateNode)
	for _, p := range private {
		fmt.Fprintf(&script, "\t\t%s;\n", p)
	}
	fmt.Fprintf(&script, "};\n")

	fmt.Fprintf(&stubs, "//go:build ibverbs\n\n/* Generated by gen.go from %s; do not edit.\n", lib)
	fmt.Fprintf(&stubs, "   The exports of rdma-core's libibverbs that softnic does not implement:\n")
	fmt.Fprintf(&stubs, "   each fails as ibverbs documents (EOPNOTSUPP), and the symbols of old\n")
	fmt.Fprintf(&stubs, "   versions (name@IBVERBS_1.0, the pre-1.1 ABI) fail the same way. */\n\n")
	fmt.Fprintf(&stubs, "#include <errno.h>\n#include <stddef.h>\n#include <stdbool.h>\n\n")
	compat := map[string]bool{}
	for _, s := range syms {
		if !s.def {
			compat[s.name] = true
		}
	}
	for _, s := range syms {
		if s.kind == "OBJECT" {
			fmt.Fprintf(&stubs, "bool %s;\n\n", s.name)
			continue
		}
		fn := s.name
		if s.def && implemented[s.name] {
			continue
		}
		if s.def && compat[s.name] {
			// Exported as name@@version through an alias, as in verbs.c.
			fn = "__snic_v_" + s.name
			fmt.Fprintf(&stubs, "__asm__(\".symver %s, %s@@%s\");\n", fn, s.name, s.version)
		}
		if !s.def {
			fn = "__snic_compat_" + strings.ReplaceAll(s.version, ".", "_") + "_" + s.name
			fmt.Fprintf(&stubs, "__asm__(\".symver %s, %s@%s\");\n", fn, s.name, s.version)
		}
		switch {
		case retNULL[s.name]:
			fmt.Fprintf(&stubs, "void *%s(void) { errno = EOPNOTSUPP; return NULL; }\n\n", fn)
		case retVoid[s.name]:
			fmt.Fprintf(&stubs, "void %s(void) {}\n\n", fn)
		case retMinus1[s.name]:
			fmt.Fprintf(&stubs, "int %s(void) { errno = EOPNOTSUPP; return -1; }\n\n", fn)
		case retZero[s.name]:
			fmt.Fprintf(&stubs, "int %s(void) { return 0; }\n\n", fn)
		case !s.def && (strings.Contains(s.name, "create") || strings.Contains(s.name, "alloc") ||
			strings.Contains(s.name, "open") || strings.Contains(s.name, "reg_mr") ||
			strings.Contains(s.name, "get_device")):
			// The old ABI's constructors return pointers.
			fmt.Fprintf(&stubs, "void *%s(void) { errno = EOPNOTSUPP; return NULL; }\n\n", fn)
		default:
			fmt.Fprintf(&stubs, "int %s(void) { errno = EOPNOTSUPP; return EOPNOTSUPP; }\n\n", fn)
		}
	}
	// A name exported in two versions gets both through .symver (the
	// linker matches the version script by name, so the plain name must
	// not be exported): verbs.c's definition is hidden, and an alias of
	// it becomes name@@default.
	fmt.Fprintf(&vers, "/* Generated by gen.go from %s; do not edit. verbs.c includes it\n   twice: the hidden redeclarations first, the versioned aliases last. */\n", lib)
	fmt.Fprintf(&vers, "#ifndef SNIC_VERSIONS_ALIASES\n")
	for _, s := range syms {
		if s.def && implemented[s.name] && compat[s.name] {
			fmt.Fprintf(&vers, "extern __typeof(%s) %s __attribute__((visibility(\"hidden\")));\n", s.name, s.name)
		}
	}
	fmt.Fprintf(&vers, "#else\n")
	for _, s := range syms {
		if s.def && implemented[s.name] && compat[s.name] {
			fmt.Fprintf(&vers, "extern __typeof(%s) __snic_v_%s __attribute__((alias(\"%s\"), visibility(\"default\")));\n", s.name, s.name, s.name)
			fmt.Fprintf(&vers, "__asm__(\".symver __snic_v_%s, %s@@%s\");\n", s.name, s.name, s.version)
		}
	}
	fmt.Fprintf(&vers, "#endif\n")
	for name, b := range map[string]*bytes.Buffer{"symbols.txt": &list, "libibverbs.map": &script, "stubs_gen.c": &stubs, "versions_gen.h": &vers} {
		if err := os.WriteFile(name, b.Bytes(), 0o644); err != nil {
			log.Fatal(err)
		}
	}
}

// nodeKey sorts IBVERBS_1.0 < IBVERBS_1.1 < ... < IBVERBS_1.14 < IBVERBS_PRIVATE_*.
func nodeKey(n string) string {
	var major, minor int
	if _, err := fmt.Sscanf(n, "IBVERBS_%d.%d", &major, &minor); err == nil {
		return fmt.Sprintf("A%04d.%04d", major, minor)
	}
	return "B" + n
}
