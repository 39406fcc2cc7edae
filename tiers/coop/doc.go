// Package coop is cooperation between tiers, as pure functions: what a child
// tier instance tells its parent (hints), what the parent makes of its
// children's hints (constraints for its own solve) and what it sends back down
// (a move budget and a target utilization per child).
//
// Child side, ChildHints: from the instance's own view it derives
//
//   - headroom that is usable: per child, the room left below the target
//     utilization (not the aggregate capacity minus the aggregate load, which
//     counts room on children that cannot take anything);
//   - a shed request, with an amount and the candidate shards, when some child
//     is above target and the instance cannot move the excess to another of
//     its children (labels, pins, allowed lists, anti-affinity or room below
//     target rule every destination out);
//   - SLO-at-risk hints naming the shards whose latency SLO is below the
//     measured p99 of the child they run on;
//   - proposed constraints (an avoid rule naming the instance itself) for
//     shards it holds but cannot place on any of its children: no child's
//     rules admit them, or they are larger than every child that does
//     (capacity counts: a shard bigger than every host of a region is
//     admitted by every host's rules); they open the shed request too. An
//     unplaced shard that would fit a child but finds no room on any now is
//     shed without a proposal.
//
// Parent side, Derive: for each active child's hints it builds constraints for
// its own solve, each with a Reason that shows in explanations:
//
//   - a shed request that names shards holds those that fit, whole, in the
//     usable headroom the other children reported away from that child for
//     Config.Hold (an allowed rule listing the other active children that
//     admit them and have room for them; a soft avoid rule when none has),
//     and the round that answers it may move only them (a max_moves rule);
//     Derived.Shed gives the capacity the parent's control loop should see
//     the child with (its load without them, in the resource the request
//     weighs most in; LowerCapacities applies it), so that the round runs. A
//     request that names no shard becomes a capacity limit (its load minus
//     the amount, bounded by the room the others have). Requests are refused
//     when the children together are at or above the target, when every
//     shard named is already moving, or when nothing fits elsewhere;
//   - an SLO-at-risk hint becomes a soft avoid rule for those shards on that
//     child;
//   - a proposed constraint is validated (known kind, a child only speaks for
//     itself, shards that exist, at most Config.MaxShards of them, a limit no
//     larger than the child's capacity) and either used or refused with why;
//   - usable headroom becomes a capacity limit (load plus headroom) when that is
//     below the child's capacity, unless the limits together would leave less
//     room than the load the parent must place.
//
// The parent's memory of held shards is an explicit value (Memory) passed in
// and returned, so Derive stays a pure function of its inputs; time comes from
// View.Now. Nothing here reads a clock or uses randomness.
//
// What the derived constraints guarantee (the property test checks it): when
// the active children's capacities add up to at least the load of the view's
// shards, the effective capacities (capacity and every derived capacity limit)
// still do, and every shard named in a derived allowed rule has an allowed
// active child other than the one it is held away from, with room for it. It
// is not a bin-packing guarantee: a view whose shards fit in total but not
// shard by shard stays as hard to place as it was.
package coop
