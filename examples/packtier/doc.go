// Package packtier is the tutorial's custom tier policy (docs/writing-a-tier.md):
// "pack" places shards first-fit-decreasing onto as few children as it can, in
// the children's order, so the children at the end stay empty and can be powered
// down. It shows the whole contract: a pure Plan over an interfaces.View, moves
// with reasons, infeasibility as a result, and registration by name.
package packtier
