// Package tiers holds the tier registry (name → policy factory), the built-in
// global, region and host policies, and example custom tiers. Policies are pure:
// they plan from an interfaces.View and never read a clock.
package tiers
