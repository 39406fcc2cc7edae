// Package wire is Strata's wire schema: the protobuf messages and gRPC services that
// cross a process boundary, and the conversions between them and the domain types of
// package interfaces.
//
// # Schema
//
// All messages are in protobuf package strata.v1. The .proto files sit beside the
// generated code (make proto regenerates it; make proto-check fails when the
// committed code is stale):
//
//   - types.proto: the domain types (Load, Shard, ShardConstraints, Child,
//     Assignment, Move, Plan, Infeasible, Summary, ShardLoad, Report, Hint,
//     Constraint, View) and the enums ChildState, HintKind, ConstraintKind and
//     PlanStatus. Each message mirrors the Go type of the same name in interfaces.
//     ErrorDetail rides in gRPC status details (status.go).
//   - session.proto: service Session, the shard-assignment interface between a tier
//     and a child (docs/architecture.md; the rules for moves, epochs and leases
//     are in coordinator/tierd and docs/operations.md, "Leases, epochs and what
//     happens on failure"). Connect is one bidirectional stream per child:
//     ChildMessage (Hello, Report, Ack, Hint) up, ParentMessage (Assign, Revoke,
//     Constraints, LeaseGrant, Redirect) down. Assign, Revoke and Ack carry the
//     shard's epoch.
//   - admin.proto: service Admin for the CLI and tools (jobs, shards, the tier tree,
//     drain, explain, what-if plans bound to a state index, Raft membership).
//   - plugin.proto: service TierPolicy, interfaces.Policy as a service, so that a
//     tier policy can run as its own process.
//   - worker.proto: service Worker, between a host agent and the stream workers
//     it runs (kept by the host agent's owners; see coordinator/hostagent).
//
// Load vectors travel as four doubles (cpu, mem, net, tasks) plus a map of further
// dimensions by name. Durations travel as int64 nanoseconds (fields named *_nanos),
// instants as int64 Unix nanoseconds (*_unix_nanos). View.now_unix_nanos is a
// proto3 optional field: absent is the zero time.Time, present 0 is the Unix epoch
// (a virtual clock may well start there), so both travel exactly. An instant
// outside int64 nanoseconds (before 1677, after 2262) is refused by ViewToWire.
//
// The enums ChildState, HintKind, ConstraintKind and PlanStatus use the same numbers
// as their Go counterparts, so their zero value is the Go zero value (active,
// headroom, capacity, ok) rather than an UNSPECIFIED placeholder: a sender that
// leaves the field unset means exactly what the Go zero value means. AckKind exists
// only on the wire and does have ACK_KIND_UNSPECIFIED = 0, which is invalid.
//
// # Versioning
//
// Fields and enum values are only ever appended: a field number is never reused or
// given another meaning, a removed field is marked reserved, and a new enum value
// gets the next number in both the .proto file and the Go constants of interfaces.
// Changes of that kind keep the contract version.
//
// ContractVersion is the version of the contract as a whole (the session protocol
// and the tier-policy contract share it). It grows only when the meaning of the
// contract changes in a way old peers would get wrong. MinContractVersion is the
// oldest version this build still speaks.
//
// Negotiation picks the highest version both sides speak (Negotiate):
//   - a child sends the range it speaks in Hello (min_protocol_version ..
//     protocol_version); the parent answers with the chosen version in
//     LeaseGrant.protocol_version, or ends the stream with FAILED_PRECONDITION;
//   - a tier leader calls TierPolicy.Info on a plugin, picks the version, and sends
//     it as PlanRequest.contract_version on every Plan; a plugin refuses a version
//     it does not speak with FAILED_PRECONDITION.
//
// # Conversions and helpers
//
// convert.go holds every conversion between wire and domain types, in one place:
// XxxToWire and XxxFromWire for Load, Shard, Child, Assignment, Move, Plan
// (with Infeasible and Summary), ShardLoad, Report, Hint, Constraint and View, the
// enum conversions, and TimeToWire/TimeFromWire. Beside it:
//
//   - session.go: builders and checks for the session messages (Hello, Assign,
//     Revoke, Ack, LeaseGrant, Constraints), returning domain values;
//   - version.go: ContractVersion, SupportedVersions, Negotiate;
//   - status.go: ToStatus and FromStatus, which carry the sentinel errors of
//     interfaces across gRPC as status codes plus an ErrorDetail, so that
//     errors.Is works on the far side;
//   - policy.go: NewPolicyServer serves an interfaces.Factory as a TierPolicy
//     plugin; DialPolicy returns an interfaces.Policy that calls one.
//
// ToWire is a faithful translation and does not validate; it always sets every
// message-typed field (a zero Load travels as an empty Load message), except
// Hint.constraint, which is absent exactly when the Go pointer is nil.
//
// FromWire validates: a bad enum value, a negative or non-finite number, a malformed
// identifier or a broken rule returns an *interfaces.FieldError that names the
// field by its path from the message converted (e.g. "view.shards[3].load.cpu") and
// wraps interfaces.ErrInvalid. FromWire never panics: a nil message reads as the
// empty message.
//
// Canonical form. Protobuf cannot tell an empty repeated field or map from an absent
// one, so FromWire returns nil for every empty slice and map (never an empty
// non-nil one), and every non-zero instant as time.Unix(0, n).UTC() (same
// instant, location UTC, no monotonic reading). A domain value in that canonical
// form survives domain → wire → domain exactly (reflect.DeepEqual); any valid wire
// message survives wire → domain → wire exactly (proto.Equal) once its unset
// message fields are read as set-and-empty. The property tests check both
// directions, through the encoding, on random values.
//
// Pure packages (interfaces, balancer, tiers, sim) must not import this package;
// the coordinator and the daemons convert at their edges.
package wire
