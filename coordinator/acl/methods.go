package acl

// Methods maps every Admin RPC (its full gRPC method name) to the policy a
// call needs. An RPC missing here is refused to every caller, whatever its
// token; a test in coordinator/tierd fails when the Admin service has an RPC
// this table does not name.
var Methods = map[string]Policy{
	"/strata.v1.Admin/Status":     PolicyRead,
	"/strata.v1.Admin/ListJobs":   PolicyRead,
	"/strata.v1.Admin/ListShards": PolicyRead,
	"/strata.v1.Admin/Explain":    PolicyRead,
	"/strata.v1.Admin/RaftPeers":  PolicyRead,

	"/strata.v1.Admin/Drain":        PolicyOperate,
	"/strata.v1.Admin/Undrain":      PolicyOperate,
	"/strata.v1.Admin/Plan":         PolicyOperate,
	"/strata.v1.Admin/ApplyPlan":    PolicyOperate,
	"/strata.v1.Admin/ReleaseShard": PolicyOperate,

	"/strata.v1.Admin/SubmitJob":   PolicyAdmin,
	"/strata.v1.Admin/DeleteJob":   PolicyAdmin,
	"/strata.v1.Admin/RaftJoin":    PolicyAdmin,
	"/strata.v1.Admin/RaftRemove":  PolicyAdmin,
	"/strata.v1.Admin/CreateToken": PolicyAdmin,
	"/strata.v1.Admin/ListTokens":  PolicyAdmin,
	"/strata.v1.Admin/RevokeToken": PolicyAdmin,
}

// AdminService is the prefix of the Admin RPCs' method names: the calls the
// token check applies to (sessions between tiers are authenticated by their
// certificates, not by tokens).
const AdminService = "/strata.v1.Admin/"
