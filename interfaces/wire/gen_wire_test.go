package wire_test

// A generator of random, valid wire messages that walks the message descriptors,
// so that every field the schema declares is drawn — including fields appended
// later that convert.go might forget. Field rules keep the values within what
// FromWire accepts; fixups repair the few rules that span fields.

import (
	"fmt"
	"math"
	"strings"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"pgregory.net/rapid"

	"github.com/strata-sched/strata/interfaces/wire"
)

// String fields, by name, that hold identifiers (required, or possibly empty).
var (
	idFields         = map[protoreflect.Name]bool{"id": true, "job": true, "shard": true, "child": true, "allowed": true, "children": true, "shards": true, "to": true}
	optionalIDFields = map[protoreflect.Name]bool{"from": true, "pinned": true}
	nonEmptyFields   = map[protoreflect.FullName]bool{"strata.v1.Child.tier": true, "strata.v1.View.tier": true}
	// Doubles that may be negative or infinite (not NaN; a move's delta is made
	// finite by fixup); every other double is a finite number ≥ 0.
	anyNumberFields = map[protoreflect.FullName]bool{
		"strata.v1.Move.delta": true, "strata.v1.Summary.objective": true,
		"strata.v1.Summary.max_over_mean": true, "strata.v1.Summary.max_over_lb": true, "strata.v1.Summary.lb": true,
	}
	// Integers that may be negative; every other int64 is ≥ 0.
	signedIntFields = map[protoreflect.FullName]bool{"strata.v1.View.seed": true, "strata.v1.View.now_unix_nanos": true}
	// Map key rules by map field.
	mapKeys = map[protoreflect.FullName]*rapid.Generator[string]{
		"strata.v1.Load.extra":              genExtraName,
		"strata.v1.ShardConstraints.labels": genLabelKey,
		"strata.v1.Child.labels":            genLabelKey,
		"strata.v1.Infeasible.excluded":     genID,
		"strata.v1.Summary.max_over_mean":   genResourceName,
		"strata.v1.Summary.max_over_lb":     genResourceName,
		"strata.v1.Summary.lb":              genResourceName,
		"strata.v1.View.reports":            genID,
	}
)

// genWire draws a valid message of type T.
func genWire[T proto.Message]() *rapid.Generator[T] {
	var zero T
	md := zero.ProtoReflect().Descriptor()
	return rapid.Custom(func(t *rapid.T) T {
		return drawMessage(t, md).Interface().(T)
	})
}

func drawMessage(t *rapid.T, md protoreflect.MessageDescriptor) protoreflect.Message {
	mt, err := protoregistry.GlobalTypes.FindMessageByName(md.FullName())
	if err != nil {
		t.Fatalf("message type %s: %v", md.FullName(), err)
	}
	m := mt.New()
	fields := md.Fields()
	for i := 0; i < fields.Len(); i++ {
		fd := fields.Get(i)
		label := string(fd.FullName())
		switch {
		case fd.IsList():
			n := rapid.IntRange(0, 3).Draw(t, label+" len")
			l := m.Mutable(fd).List()
			for j := 0; j < n; j++ {
				l.Append(drawValue(t, fd, m))
			}
		case fd.IsMap():
			n := rapid.IntRange(0, 3).Draw(t, label+" len")
			mp := m.Mutable(fd).Map()
			keys := mapKeys[fd.FullName()]
			if keys == nil {
				keys = genNonEmptyText
			}
			for j := 0; j < n; j++ {
				k := keys.Draw(t, label+" key")
				mp.Set(protoreflect.ValueOfString(k).MapKey(), drawValue(t, fd.MapValue(), m))
			}
		case fd.Kind() == protoreflect.MessageKind:
			// An unset message field reads as the empty message.
			if rapid.IntRange(0, 3).Draw(t, label+" set?") > 0 {
				m.Set(fd, drawValue(t, fd, m))
			}
		case fd.HasPresence():
			if rapid.Bool().Draw(t, label+" set?") {
				m.Set(fd, drawValue(t, fd, m))
			}
		default:
			m.Set(fd, drawValue(t, fd, m))
		}
	}
	fixup(t, m.Interface())
	return m
}

// drawValue draws one value (a scalar, a list element or a map value) of field fd.
func drawValue(t *rapid.T, fd protoreflect.FieldDescriptor, parent protoreflect.Message) protoreflect.Value {
	label := string(fd.FullName())
	// For a map value, the rules are those of the map field.
	rule := fd.FullName()
	name := fd.Name()
	if fd.ContainingMessage() != nil && fd.ContainingMessage().IsMapEntry() {
		rule = mapFieldOf(fd)
		name = ""
	}
	switch fd.Kind() {
	case protoreflect.MessageKind:
		return protoreflect.ValueOfMessage(drawMessage(t, fd.Message()))
	case protoreflect.EnumKind:
		vals := fd.Enum().Values()
		nums := make([]protoreflect.EnumNumber, vals.Len())
		for i := range nums {
			nums[i] = vals.Get(i).Number()
		}
		return protoreflect.ValueOfEnum(rapid.SampledFrom(nums).Draw(t, label))
	case protoreflect.DoubleKind:
		if anyNumberFields[rule] {
			return protoreflect.ValueOfFloat64(genNumber.Draw(t, label))
		}
		return protoreflect.ValueOfFloat64(genNonNeg.Draw(t, label))
	case protoreflect.Int64Kind:
		if signedIntFields[rule] {
			return protoreflect.ValueOfInt64(rapid.Int64().Draw(t, label))
		}
		if strings.HasPrefix(string(name), "latency_") {
			return protoreflect.ValueOfInt64(rapid.Int64Range(0, int64(wire.MaxLatency)).Draw(t, label))
		}
		return protoreflect.ValueOfInt64(rapid.Int64Min(0).Draw(t, label))
	case protoreflect.Uint64Kind:
		return protoreflect.ValueOfUint64(rapid.Uint64().Draw(t, label))
	case protoreflect.Uint32Kind:
		return protoreflect.ValueOfUint32(rapid.Uint32().Draw(t, label))
	case protoreflect.BoolKind:
		return protoreflect.ValueOfBool(rapid.Bool().Draw(t, label))
	case protoreflect.StringKind:
		switch {
		case idFields[name]:
			return protoreflect.ValueOfString(genID.Draw(t, label))
		case optionalIDFields[name]:
			return protoreflect.ValueOfString(rapid.OneOf(rapid.Just(""), genID).Draw(t, label))
		case nonEmptyFields[rule]:
			return protoreflect.ValueOfString(genNonEmptyText.Draw(t, label))
		}
		return protoreflect.ValueOfString(genText.Draw(t, label))
	}
	t.Fatalf("field %s: kind %v has no generator; add one", fd.FullName(), fd.Kind())
	return protoreflect.Value{}
}

// mapFieldOf returns the full name of the map field whose entry holds fd.
func mapFieldOf(fd protoreflect.FieldDescriptor) protoreflect.FullName {
	entry := fd.ContainingMessage()
	parent := entry.Parent().(protoreflect.MessageDescriptor)
	fields := parent.Fields()
	for i := 0; i < fields.Len(); i++ {
		if f := fields.Get(i); f.IsMap() && f.MapValue().ContainingMessage() == entry {
			return f.FullName()
		}
	}
	panic(fmt.Sprintf("no map field for entry %s", entry.FullName()))
}

// fixup repairs the rules that span fields.
func fixup(t *rapid.T, m proto.Message) {
	switch m := m.(type) {
	case *wire.Shard:
		if c := m.Constraints; c != nil {
			if c.MaxPerChild > 0 && c.AntiAffinity == "" {
				c.AntiAffinity = "group"
			}
			if c.Pinned != "" && len(c.Allowed) > 0 && !contains(c.Allowed, c.Pinned) {
				c.Allowed = append(c.Allowed, c.Pinned)
			}
		}
	case *wire.Child:
		if m.Capacity == nil {
			m.Capacity = &wire.Load{}
		}
		c := m.Capacity
		zero := c.Cpu == 0 && c.Mem == 0 && c.Net == 0 && c.Tasks == 0
		for _, v := range c.Extra {
			zero = zero && v == 0
		}
		if zero {
			c.Cpu = 1
		}
	case *wire.HostClass:
		if m.Count == 0 {
			m.Count = 1 // a class is counted at least once
		}
	case *wire.Move:
		if m.From == m.To {
			m.From = ""
		}
		if math.IsInf(m.Delta, 0) {
			m.Delta = math.Copysign(1, m.Delta) // a move's delta is finite (any sign)
		}
	case *wire.Constraint:
		if m.Kind == wire.ConstraintKind_CONSTRAINT_KIND_PIN && len(m.Children) == 0 {
			m.Children = []string{genID.Draw(t, "pin to")}
		}
	case *wire.Hint:
		if m.Kind == wire.HintKind_HINT_KIND_CONSTRAINT && m.Constraint == nil {
			m.Constraint = drawMessage(t, (&wire.Constraint{}).ProtoReflect().Descriptor()).Interface().(*wire.Constraint)
		}
	case *wire.Report:
		seen := map[string]bool{}
		kept := m.Shards[:0]
		for _, sl := range m.Shards {
			if !seen[sl.GetShard()] {
				seen[sl.GetShard()] = true
				kept = append(kept, sl)
			}
		}
		m.Shards = kept
	case *wire.View:
		for k, r := range m.Reports {
			r.Child = k
		}
	}
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

// canonWire returns a copy of m in the canonical wire form ToWire produces: every
// unset message field set to the empty message, except Hint.constraint, whose
// absence means a nil pointer.
//
// It copies through the encoding rather than with proto.Clone, because Clone drops
// a proto3 double field holding -0 (its merge treats -0 as unset), which the
// encoding keeps.
func canonWire[T proto.Message](m T) T {
	b, err := proto.Marshal(m)
	if err != nil {
		panic(err)
	}
	c := m.ProtoReflect().New().Interface().(T)
	if err := proto.Unmarshal(b, c); err != nil {
		panic(err)
	}
	canonMessage(c.ProtoReflect())
	return c
}

func canonMessage(m protoreflect.Message) {
	fields := m.Descriptor().Fields()
	for i := 0; i < fields.Len(); i++ {
		fd := fields.Get(i)
		switch {
		case fd.IsList() && fd.Kind() == protoreflect.MessageKind:
			l := m.Get(fd).List()
			for j := 0; j < l.Len(); j++ {
				canonMessage(l.Get(j).Message())
			}
		case fd.IsMap() && fd.MapValue().Kind() == protoreflect.MessageKind:
			m.Get(fd).Map().Range(func(_ protoreflect.MapKey, v protoreflect.Value) bool {
				canonMessage(v.Message())
				return true
			})
		case !fd.IsList() && !fd.IsMap() && fd.Kind() == protoreflect.MessageKind:
			if (fd.FullName() == "strata.v1.Hint.constraint" || fd.FullName() == "strata.v1.Report.shape") && !m.Has(fd) {
				continue
			}
			canonMessage(m.Mutable(fd).Message())
		}
	}
}
