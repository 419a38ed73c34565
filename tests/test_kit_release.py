"""The Android kit in a release (R8-minified) app: the consumer keep rules and the merged manifest.

No Android SDK runs here, so R8 and the manifest merger cannot: these tests read what they would
read. LiteRT's native code looks Kotlin classes and members up by name; R8 cannot see those
lookups, and a renamed or removed target aborts the process at the first model open. The lookups
are listed below as data, each from LiteRT's JNI sources at tag v2.2.0 (the catalog's version), and
the rules file is parsed as R8 reads keep rules, so a rule that keeps a class but not the
constructor native code calls fails. Set EDGE_M3_LITERT_GIT to a git directory of
google-ai-edge/LiteRT to check the data against those sources too.
"""

from __future__ import annotations

import os
import re
import subprocess
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
ANDROID = ROOT / "android_assets"
RULES = ANDROID / "consumer-rules.pro"
KIT_SOURCES = ANDROID / "src/main/java"

LITERT_TAG = "v2.2.0"  # google-ai-edge/LiteRT, commit 145c7523ff08d5e57ab5c582141775eea47da9c7
LITERT_JNI = "litert/kotlin/src/main/jni/"
TFLITE_JNI = "tflite/java/src/main/native/"
CM_JNI = LITERT_JNI + "litert_compiled_model_jni.cc"
LITERT = "com.google.ai.edge.litert."
TFLITE = "org.tensorflow.lite."


# ---- the data: what LiteRT's native code looks up ------------------------------------------------

@dataclass(frozen=True)
class JniLookup:
    """One FindClass / GetMethodID / GetStaticFieldID of LiteRT's JNI, where it is in the source."""

    source: str  # file in google-ai-edge/LiteRT at LITERT_TAG
    function: str
    lines: str
    cls: str  # binary name (FindClass's, with '.' for '/')
    member: str | None = None  # "<init>" or a static field's name; None: the FindClass itself
    descriptor: str | None = None  # the JNI signature passed with it
    modifiers: frozenset[str] = frozenset({"public"})  # the member's, from LiteRT's Kotlin source


ELEMENT_TYPE = LITERT + "TensorType$ElementType"
ENUM_CONSTANT = frozenset({"public", "static", "final"})


def _element_type_fields() -> list[JniLookup]:
    """ToJavaElementType maps each element type to a constant by name (lines 596-608)."""
    descriptor = f"L{ELEMENT_TYPE.replace('.', '/')};"
    return [JniLookup(CM_JNI, "ToJavaElementType", "617-619", ELEMENT_TYPE, name, descriptor, ENUM_CONSTANT)
            for name in ("INT", "FLOAT", "INT8", "BOOLEAN", "INT64")]


JNI_LOOKUPS: list[JniLookup] = [
    # Every native error of CompiledModel, Environment and TensorBuffer is thrown through this.
    JniLookup(LITERT_JNI + "litert_jni_common.h", "ThrowLiteRtException", "38", LITERT + "LiteRtException"),
    JniLookup(LITERT_JNI + "litert_jni_common.h", "ThrowLiteRtException", "41-42", LITERT + "LiteRtException",
              "<init>", "(ILjava/lang/String;)V"),
    # nativeGetInputBufferRequirements / nativeGetOutputBufferRequirements.
    JniLookup(CM_JNI, "CreateJavaTensorBufferRequirements", "507-508", LITERT + "TensorBufferRequirements"),
    JniLookup(CM_JNI, "CreateJavaTensorBufferRequirements", "514-515",
              LITERT + "TensorBufferRequirements", "<init>", "([II[I)V"),
    # nativeGetInputTensorType / nativeGetOutputTensorType -> ToJavaTensorType -> these three.
    JniLookup(CM_JNI, "ToJavaElementType", "588-589", ELEMENT_TYPE),
    *_element_type_fields(),
    JniLookup(CM_JNI, "ToJavaLayout", "632-633", LITERT + "TensorType$Layout"),
    JniLookup(CM_JNI, "ToJavaLayout", "661", LITERT + "TensorType$Layout", "<init>", "([I[I)V"),
    JniLookup(CM_JNI, "ToJavaLayout", "665", LITERT + "TensorType$Layout", "<init>", "([I)V"),
    JniLookup(CM_JNI, "ToJavaTensorType", "682-683", LITERT + "TensorType"),
    JniLookup(CM_JNI, "ToJavaTensorType", "698-701", LITERT + "TensorType",
              "<init>", f"(L{ELEMENT_TYPE.replace('.', '/')};L{LITERT.replace('.', '/')}TensorType$Layout;)V"),
]

# The other direction: the VM binds each native method to the JNIEXPORT symbol
# Java_<class>_<method> (no RegisterNatives anywhere in these sources), so the class's and the
# method's names must survive. Class -> (source file, native methods), LiteRT v2.2.0.
NATIVE_METHODS: dict[str, tuple[str, tuple[str, ...]]] = {
    LITERT + "CompiledModel": (CM_JNI, (
        "nativeCreateFromAsset", "nativeCreateFromFile", "nativeCreateInputBuffer", "nativeCreateInputBuffers",
        "nativeCreateInputBuffersBySignature", "nativeCreateOutputBuffer", "nativeCreateOutputBuffers",
        "nativeCreateOutputBuffersBySignature", "nativeDestroy", "nativeGetInputBufferRequirements",
        "nativeGetInputTensorType", "nativeGetOutputBufferRequirements", "nativeGetOutputTensorType",
        "nativeRun", "nativeRunBySignature", "nativeRunBySignatureWithMap")),
    LITERT + "Environment": (LITERT_JNI + "litert_environment_jni.cc", (
        "nativeCreate", "nativeDestroy", "nativeGetAvailableAccelerators")),
    LITERT + "TensorBuffer": (LITERT_JNI + "litert_tensor_buffer_jni.cc", (
        "nativeDestroy", "nativeReadBoolean", "nativeReadFloat", "nativeReadInt", "nativeReadInt8",
        "nativeReadLong", "nativeWriteBoolean", "nativeWriteFloat", "nativeWriteInt", "nativeWriteInt8",
        "nativeWriteLong")),
    # The Interpreter API (WeightCache.Off): libLiteRt.so links tflite/java/src/main/native
    # (litert/kotlin/BUILD, target LiteRt). Its JNI looks up only java.* classes by name.
    TFLITE + "InterpreterFactoryImpl": (TFLITE_JNI + "interpreter_factory_impl_jni.cc", (
        "nativeRuntimeVersion", "nativeSchemaVersion")),
    TFLITE + "NativeInterpreterWrapper": (TFLITE_JNI + "nativeinterpreterwrapper_jni.cc", (
        "allocateTensors", "allowBufferHandleOutput", "allowFp16PrecisionForFp32", "createCancellationFlag",
        "createErrorReporter", "createInterpreter", "createModel", "createModelWithBuffer", "delete",
        "deleteCancellationFlag", "getExecutionPlanLength", "getInputCount", "getInputNames",
        "getInputTensorIndex", "getOutputCount", "getOutputNames", "getOutputTensorIndex", "getSignatureKeys",
        "hasUnresolvedFlexOp", "resizeInput", "run", "setCancelled")),
    TFLITE + "NativeInterpreterWrapperExperimental": (
        TFLITE_JNI + "nativeinterpreterwrapperexperimental_jni.cc", ("resetVariableTensors",)),
    TFLITE + "NativeSignatureRunnerWrapper": (TFLITE_JNI + "nativesignaturerunner_jni.cc", (
        "nativeAllocateTensors", "nativeGetInputIndex", "nativeGetOutputIndex", "nativeGetSignatureRunner",
        "nativeGetSubgraphIndex", "nativeInputNames", "nativeInvoke", "nativeOutputNames",
        "nativeResizeInput")),
    TFLITE + "TensorImpl": (TFLITE_JNI + "tensor_jni.cc", (
        "buffer", "create", "createSignatureInputTensor", "createSignatureOutputTensor", "delete", "dtype",
        "hasDelegateBufferHandle", "index", "name", "numBytes", "quantizationScale", "quantizationZeroPoint",
        "readMultiDimensionalArray", "shape", "shapeSignature", "writeDirectBuffer",
        "writeMultiDimensionalArray", "writeScalar")),
    TFLITE + "TensorFlowLite": (TFLITE_JNI + "tensorflow_lite_jni.cc", ("nativeDoNothing",)),
}

# What each LiteRT class the kit names brings to the native side: the objects native code builds
# for it (JNI_LOOKUPS' classes) and the classes whose native methods it ends up calling
# (CompiledModel.create makes an Environment, Model.kt; Interpreter runs on the wrappers).
KIT_REACHES: dict[str, set[str]] = {
    LITERT + "CompiledModel": {LITERT + "CompiledModel", LITERT + "Environment", LITERT + "TensorBuffer",
                               LITERT + "LiteRtException"},
    LITERT + "TensorBuffer": {LITERT + "TensorBuffer", LITERT + "LiteRtException"},
    LITERT + "LiteRtException": {LITERT + "LiteRtException"},
    LITERT + "TensorType": {LITERT + "TensorType", ELEMENT_TYPE, LITERT + "TensorType$Layout"},
    TFLITE + "Interpreter": {TFLITE + "NativeInterpreterWrapper",
                             TFLITE + "NativeInterpreterWrapperExperimental",
                             TFLITE + "NativeSignatureRunnerWrapper", TFLITE + "TensorImpl",
                             TFLITE + "TensorFlowLite"},
}
# Kit calls whose result native code builds: CompiledModel.getInput/OutputTensorType return a
# TensorType made by ToJavaTensorType (its ElementType and Layout too).
KIT_CALLS_RECEIVING: dict[str, set[str]] = {
    "getInputTensorType": {LITERT + "TensorType", ELEMENT_TYPE, LITERT + "TensorType$Layout"},
    "getOutputTensorType": {LITERT + "TensorType", ELEMENT_TYPE, LITERT + "TensorType$Layout"},
}

# The permissions LiteRT's AAR manifest declares: litert/kotlin/src/main/AndroidManifest.xml at
# v2.2.0, lines 24-25 ("Required for downloading AiPack models"); it is the manifest of
# litert_for_maven, which the litert-aar target packages (litert/kotlin/BUILD, lines 431-436, 460-461).
LITERT_MANIFEST = "litert/kotlin/src/main/AndroidManifest.xml"
LITERT_MANIFEST_PACKAGE = "com.google.ai.edge.litert"  # its package attribute, what tools:selector names
LITERT_PERMISSIONS = {"android.permission.FOREGROUND_SERVICE",
                      "android.permission.FOREGROUND_SERVICE_DATA_SYNC"}


# ---- keep rules as R8 reads them ------------------------------------------------------------------

KEEP_DIRECTIVES = {"keep", "keepclassmembers", "keepclasseswithmembers",
                   "keepnames", "keepclassmembernames", "keepclasseswithmembernames"}
MODIFIERS = {"public", "private", "protected", "static", "final", "abstract", "native", "synchronized",
             "volatile", "transient", "strictfp", "synthetic", "bridge", "varargs"}
PRIMITIVES = {"Z": "boolean", "B": "byte", "C": "char", "S": "short", "I": "int", "J": "long", "F": "float",
              "D": "double", "V": "void"}


@dataclass(frozen=True)
class Member:
    """A real class member: a constructor, method or field, with its JNI descriptor when known."""

    kind: str  # "init" | "method" | "field"
    name: str
    descriptor: str | None
    modifiers: frozenset[str]


@dataclass(frozen=True)
class MemberSpec:
    """One `...;` of a keep rule's body."""

    text: str
    modifiers: frozenset[str]
    negated: frozenset[str]
    kind: str  # "all" | "methods" | "fields" | "init" | "method" | "field"
    type: str | None = None
    name: str | None = None
    args: tuple[str, ...] | None = None


@dataclass(frozen=True)
class KeepRule:
    """One -keep* rule: what it keeps, under which options."""

    directive: str
    options: frozenset[str]
    keyword: str  # class | interface | enum, '!' for a negated one
    classes: tuple[str, ...]  # class name patterns, '!' for a negated one
    class_modifiers: frozenset[str]
    members: tuple[MemberSpec, ...]

    @property
    def keeps_class_name(self) -> bool:
        """The class's name survives (the class itself is kept, or its name is)."""
        return self.directive in {"keep", "keepclasseswithmembers", "keepnames",
                                  "keepclasseswithmembernames"} and "allowobfuscation" not in self.options

    @property
    def keeps_class(self) -> bool:
        """The class survives shrinking and keeps its name: what FindClass needs."""
        return (self.directive in {"keep", "keepclasseswithmembers"}
                and not {"allowshrinking", "allowobfuscation"} & self.options)

    @property
    def keeps_members(self) -> bool:
        """Matched members survive shrinking with their names: what GetMethodID / GetStaticFieldID need."""
        return (self.directive in {"keep", "keepclassmembers", "keepclasseswithmembers"}
                and not {"allowshrinking", "allowobfuscation"} & self.options)

    @property
    def keeps_member_names(self) -> bool:
        """Matched members keep their names if they survive: enough for a native method's binding."""
        return "allowobfuscation" not in self.options


def _strip_comments(text: str) -> str:
    """ProGuard comments run from '#' to the end of the line (no '#' is legal elsewhere)."""
    return "\n".join(line.split("#", 1)[0] for line in text.splitlines())


def _wildcard(pattern: str) -> re.Pattern[str]:
    """ProGuard's name wildcards: ? one character but '.', * any run without '.', ** any run."""
    if re.search(r"<\d+>|\*\*\*|%", pattern):
        raise ValueError(f"not a name pattern here: {pattern}")
    out = ""
    i = 0
    while i < len(pattern):
        if pattern.startswith("**", i):
            out, i = out + r".*", i + 2
        elif pattern[i] == "*":
            out, i = out + r"[^.]*", i + 1
        elif pattern[i] == "?":
            out, i = out + r"[^.]", i + 1
        else:
            out, i = out + re.escape(pattern[i]), i + 1
    return re.compile(out + r"\Z")


def _type_matches(pattern: str, actual: str) -> bool:
    """A member specification's type against a real one: *** is any type, % any primitive, and
    name wildcards match class types only, with the same array dimensions."""
    if pattern == "***":
        return True
    if pattern.count("[]") != actual.count("[]"):
        return False
    wanted, base = pattern.replace("[]", ""), actual.replace("[]", "")
    primitive = base in PRIMITIVES.values()
    if wanted == "%":
        return primitive and base != "void"
    if primitive:
        return wanted == base
    return bool(_wildcard(wanted).match(base))


def _parse_member(text: str) -> MemberSpec:
    """One member specification: modifiers, then *, <methods>, <fields>, <init>(...), a method or a field."""
    words = text.replace("(", " ( ").replace(")", " ) ").split()
    modifiers, negated = set(), set()
    while words and words[0].lstrip("!") in MODIFIERS:
        (negated if words[0].startswith("!") else modifiers).add(words[0].lstrip("!"))
        words.pop(0)
    rest = " ".join(words).replace(" ( ", "(").replace(" )", ")").replace("( ", "(")
    mods, neg = frozenset(modifiers), frozenset(negated)
    if rest == "*":
        return MemberSpec(text, mods, neg, "all")
    if rest in ("<methods>", "<fields>"):
        return MemberSpec(text, mods, neg, rest.strip("<>"))
    call = re.fullmatch(r"(?:(?P<type>\S+)\s+)?(?P<name>[\w$<>*?]+)\((?P<args>[^()]*)\)", rest)
    if call:
        args = tuple(a.strip() for a in call["args"].split(",") if a.strip())
        if call["name"] == "<init>":
            if call["type"]:
                raise ValueError(f"a constructor has no type: {text}")
            return MemberSpec(text, mods, neg, "init", args=args)
        if not call["type"]:
            raise ValueError(f"a method needs a return type: {text}")
        return MemberSpec(text, mods, neg, "method", call["type"], call["name"], args)
    field = re.fullmatch(r"(?P<type>\S+)\s+(?P<name>[\w$*?]+)", rest)
    if field:
        return MemberSpec(text, mods, neg, "field", field["type"], field["name"])
    raise ValueError(f"cannot read the member specification {text!r}")


def parse_rules(text: str) -> list[KeepRule]:
    """Every rule of a ProGuard/R8 configuration; anything but -keep* rules, or a class
    specification these tests cannot judge (annotations, extends/implements), is an error."""
    body = _strip_comments(text)
    starts = [m.start() for m in re.finditer(r"(?m)^\s*-(?=\w)", body)]
    if body[:starts[0] if starts else len(body)].strip():
        raise ValueError(f"text before the first rule: {body[:starts[0] if starts else len(body)].strip()!r}")
    rules = []
    for start, end in zip(starts, starts[1:] + [len(body)], strict=True):
        chunk = body[start:end].strip()
        head = re.match(r"-(\w+)((?:\s*,\s*\w+)*)", chunk)
        assert head
        directive = head[1]
        if directive not in KEEP_DIRECTIVES:
            raise ValueError(f"-{directive}: only keep rules belong in consumer rules")
        options = frozenset(o.strip() for o in head[2].split(",") if o.strip())
        spec, _, members_text = chunk[head.end():].partition("{")
        members: list[MemberSpec] = []
        if members_text:
            inside, close, after = members_text.partition("}")
            if not close or after.strip():
                raise ValueError(f"unbalanced braces in {chunk!r}")
            members = [_parse_member(" ".join(m.split())) for m in inside.split(";") if m.strip()]
        words = spec.split()
        if any(w.startswith("@") for w in words) or {"extends", "implements"} & set(words):
            raise ValueError(f"annotations and extends/implements are not judged here: {chunk!r}")
        kinds = [i for i, w in enumerate(words) if w.lstrip("!") in ("class", "interface", "enum")]
        if len(kinds) != 1:
            raise ValueError(f"no class specification in {chunk!r}")
        class_modifiers = frozenset(words[:kinds[0]])
        names = tuple(n for n in "".join(words[kinds[0] + 1:]).split(",") if n)
        if not names:
            raise ValueError(f"no class name in {chunk!r}")
        rules.append(KeepRule(directive, options, words[kinds[0]], names, class_modifiers, tuple(members)))
    return rules


ENUMS = {ELEMENT_TYPE}  # of the classes named here; none is an interface


def _class_matches(rule: KeepRule, cls: str) -> bool:
    """The rule's class/interface/enum keyword and its name patterns (first match wins) select `cls`."""
    keyword = rule.keyword.lstrip("!")
    is_kind = {"class": True, "interface": False, "enum": cls in ENUMS}[keyword]
    if is_kind == rule.keyword.startswith("!"):
        return False
    for pattern in rule.classes:
        negated = pattern.startswith("!")
        if _wildcard(pattern.lstrip("!")).match(cls):
            return not negated
    return False


def _java_types(descriptor: str) -> tuple[list[str], str]:
    """A JNI method descriptor's argument types and return type, spelled as in keep rules."""
    def one(i: int) -> tuple[str, int]:
        dims = 0
        while descriptor[i] == "[":
            dims, i = dims + 1, i + 1
        if descriptor[i] == "L":
            end = descriptor.index(";", i)
            name, i = descriptor[i + 1:end].replace("/", "."), end + 1
        else:
            name, i = PRIMITIVES[descriptor[i]], i + 1
        return name + "[]" * dims, i

    if not descriptor.startswith("("):
        return [], one(0)[0]
    args, i = [], 1
    while descriptor[i] != ")":
        arg, i = one(i)
        args.append(arg)
    return args, one(i + 1)[0]


def _args_match(spec_args: tuple[str, ...], args: list[str]) -> bool:
    if spec_args == ("...",):
        return True
    if "..." in spec_args:
        raise ValueError(f"'...' among other arguments is not judged here: {spec_args}")
    return len(spec_args) == len(args) and all(
        _type_matches(s, a) for s, a in zip(spec_args, args, strict=True))


def _member_matches(spec: MemberSpec, member: Member) -> bool:
    """Whether `spec` selects `member`. Unknown facts count against a match: a native method's
    descriptor is not listed here, so only name-level specifications can select it."""
    if not spec.modifiers <= member.modifiers or spec.negated & member.modifiers:
        return False
    if spec.kind == "all":
        return True
    if spec.kind == "methods":  # not constructors: a rule must name <init> to keep one
        return member.kind == "method"
    if spec.kind == "fields":
        return member.kind == "field"
    if spec.kind != member.kind:
        return False
    if spec.kind == "init":
        return member.descriptor is not None and _args_match(spec.args or (), _java_types(member.descriptor)[0])
    assert spec.name is not None and spec.type is not None
    if not _wildcard(spec.name).match(member.name):
        return False
    if member.descriptor is None:
        return spec.type == "***" and (spec.kind == "field" or spec.args == ("...",))
    args, result = _java_types(member.descriptor)
    if spec.kind == "field":
        return _type_matches(spec.type, result)
    return _type_matches(spec.type, result) and _args_match(spec.args or (), args)


def _with_members_hold(rule: KeepRule, known: list[Member]) -> bool:
    """-keepclasseswithmembers*: applies only if every member specification matches a member;
    only the members listed here are known, so a specification matching none of them fails."""
    if rule.directive not in {"keepclasseswithmembers", "keepclasseswithmembernames"}:
        return True
    return all(any(_member_matches(spec, m) for m in known) for spec in rule.members)


def _class_modifiers_hold(rule: KeepRule) -> bool:
    """The classes here are all public, non-abstract: a rule restricted otherwise does not apply."""
    positive = {m for m in rule.class_modifiers if not m.startswith("!")}
    negated = {m.lstrip("!") for m in rule.class_modifiers if m.startswith("!")}
    return positive <= {"public"} and "public" not in negated


def _members_of(cls: str) -> list[Member]:
    """The members of `cls` known here: those native code looks up, and its native methods."""
    members = [Member("init" if lk.member == "<init>" else "field", lk.member, lk.descriptor, lk.modifiers)
               for lk in JNI_LOOKUPS if lk.cls == cls and lk.member]
    if cls in NATIVE_METHODS:
        members += [Member("method", name, None, frozenset({"native"})) for name in NATIVE_METHODS[cls][1]]
    return members


def class_kept(rules: list[KeepRule], cls: str) -> bool:
    """FindClass(cls) finds it: some rule keeps the class and its name."""
    known = _members_of(cls)
    return any(r.keeps_class and _class_modifiers_hold(r) and _class_matches(r, cls)
               and _with_members_hold(r, known) for r in rules)


def member_kept(rules: list[KeepRule], cls: str, member: Member) -> bool:
    """GetMethodID / GetStaticFieldID finds `member` of `cls`: the class is kept and a rule keeps the member."""
    known = _members_of(cls)
    return class_kept(rules, cls) and any(
        r.keeps_members and _class_modifiers_hold(r) and _class_matches(r, cls) and _with_members_hold(r, known)
        and any(_member_matches(s, member) for s in r.members) for r in rules)


def native_bound(rules: list[KeepRule], cls: str, method: str) -> bool:
    """The VM finds Java_<cls>_<method>: the class's name and the native method's name both survive."""
    known = _members_of(cls)
    member = Member("method", method, None, frozenset({"native"}))
    name_kept = any(r.keeps_class_name and _class_modifiers_hold(r) and _class_matches(r, cls)
                    and _with_members_hold(r, known) for r in rules)
    return name_kept and any(
        r.keeps_member_names and _class_modifiers_hold(r) and _class_matches(r, cls)
        and _with_members_hold(r, known) and any(_member_matches(s, member) for s in r.members) for r in rules)


def unkept(rules: list[KeepRule], classes: set[str] | None = None) -> list[str]:
    """Every JNI lookup and native binding (of `classes`, or all) the rules leave to R8."""
    missing = []
    for lk in JNI_LOOKUPS:
        if classes is not None and lk.cls not in classes:
            continue
        where = f"{lk.source}:{lk.lines} ({lk.function})"
        if lk.member is None and not class_kept(rules, lk.cls):
            missing.append(f"class {lk.cls}, FindClass at {where}")
        elif lk.member is not None:
            kind = "init" if lk.member == "<init>" else "field"
            if not member_kept(rules, lk.cls, Member(kind, lk.member, lk.descriptor, lk.modifiers)):
                missing.append(f"{lk.cls}.{lk.member} {lk.descriptor} at {where}")
    for cls, (source, methods) in NATIVE_METHODS.items():
        if classes is not None and cls not in classes:
            continue
        missing += [f"native {cls}.{m} ({source})" for m in methods if not native_bound(rules, cls, m)]
    return missing


def _rules() -> list[KeepRule]:
    """The module's consumer rules, parsed."""
    return parse_rules(RULES.read_text(encoding="utf-8"))


# ---- the rules file -------------------------------------------------------------------------------

def test_module_ships_the_rules() -> None:
    """The rules reach the app only through consumerProguardFiles in the library's defaultConfig."""
    gradle = (ANDROID / "build.gradle.kts").read_text(encoding="utf-8")
    code = "\n".join(line.split("//")[0] for line in gradle.splitlines())
    default_config = re.search(r"defaultConfig\s*\{(?P<body>[^{}]*)\}", code)
    assert default_config, "no defaultConfig block"
    files = re.findall(r'consumerProguardFiles\(\s*"([^"]+)"\s*\)', default_config["body"])
    assert files == [RULES.name], files
    assert RULES.is_file()
    # A library does not minify itself: the app's R8 run applies the rules.
    assert "proguardFiles(" not in code.replace("consumerProguardFiles(", "")


def test_rules_are_keep_rules_only() -> None:
    """AGP 9 ignores global options (-dontobfuscate, -ignorewarnings, ...) in a library's consumer
    rules and refuses them in its build: the file holds keep rules and nothing else."""
    rules = _rules()
    assert rules and all(r.directive in KEEP_DIRECTIVES for r in rules)


def test_every_jni_lookup_is_kept() -> None:
    """Each class, constructor and field LiteRT 2.2.0's native code looks up, and each native
    method it binds, survives R8 under the rules with its name."""
    assert unkept(_rules()) == []


def test_rules_keep_lookups_precisely() -> None:
    """The rules name the looked-up members rather than keeping whole packages: R8 stays free to
    shrink the rest of LiteRT's Kotlin API."""
    for rule in _rules():
        assert all("*" not in c for c in rule.classes) or all(
            m.kind == "methods" and m.modifiers == {"native"} for m in rule.members), rule
        assert not any(m.kind == "all" for m in rule.members), rule


@pytest.mark.parametrize(("rules", "kept"), [
    ("-keep class com.google.ai.edge.litert.LiteRtException", False),  # the class, not its constructor
    ("-keep class com.google.ai.edge.litert.LiteRtException { <init>(java.lang.String, int); }", False),
    ("-keep class com.google.ai.edge.litert.LiteRtException { <init>(com.google.ai.edge.litert.Status,"
     " java.lang.String); }", False),  # the Kotlin primary constructor, not the one JNI calls
    ("-keepnames class com.google.ai.edge.litert.LiteRtException { <init>(int, java.lang.String); }", False),
    ("-keep,allowobfuscation class com.google.ai.edge.litert.LiteRtException { <init>(...); }", False),
    ("-keepclassmembers class com.google.ai.edge.litert.LiteRtException { <init>(int, java.lang.String); }",
     False),  # the members, not the class
    ("-keep class com.google.ai.edge.litert.LiteRtException { <methods>; }", False),
    ("-keep class com.google.ai.edge.litert.LiteRtException { private <init>(int, java.lang.String); }", False),
    ("-keep class com.google.ai.edge.litert.* { <init>(int, java.lang.String); }", True),
    ("-keep class com.google.ai.edge.litert.** { *; }", True),
    ("-keep class com.google.ai.edge.litert.LiteRtException { <init>(...); }", True),
    ("-keep class com.google.ai.edge.litert.LiteRtException\n"
     "-keepclassmembers class com.google.ai.edge.litert.LiteRtException { public <init>(%, **); }", True),
])
def test_a_kept_class_is_not_a_kept_constructor(rules: str, kept: bool) -> None:
    """The parser judges members, not substrings: keeping LiteRtException without its
    (int, String) constructor is the release crash this file prevents."""
    assert (unkept(parse_rules(rules), {LITERT + "LiteRtException"}) == []) is kept


@pytest.mark.parametrize(("rules", "kept"), [
    ("-keep class com.google.ai.edge.litert.TensorType$ElementType", False),
    ("-keep class com.google.ai.edge.litert.TensorType$ElementType { public static final ** INT; }", False),
    ("-keep enum com.google.ai.edge.litert.TensorType$ElementType { !static <fields>; }", False),
    ("-keep enum com.google.ai.edge.litert.TensorType$ElementType { public static <fields>; }", True),
    ("-keep class com.google.ai.edge.litert.TensorType$ElementType { "
     "com.google.ai.edge.litert.TensorType$ElementType INT*; ** FLOAT; *** BOOLEAN; }", True),
])
def test_enum_constants_by_name(rules: str, kept: bool) -> None:
    """GetStaticFieldID needs each constant's name and type: all five, or the lookup aborts."""
    assert (unkept(parse_rules(rules), {ELEMENT_TYPE}) == []) is kept


@pytest.mark.parametrize(("rules", "kept"), [
    ("-keep class com.google.ai.edge.litert.Environment", False),
    ("-keepclassmembernames class com.google.ai.edge.litert.Environment { native <methods>; }", False),
    ("-keepclasseswithmembernames class com.google.ai.edge.litert.** { native <methods>; }", True),
    ("-keepclasseswithmembernames,allowobfuscation class com.google.ai.edge.litert.** { native <methods>; }",
     False),
    ("-keep class com.google.ai.edge.litert.Environment { *** native*(...); }", True),
])
def test_native_binding_needs_both_names(rules: str, kept: bool) -> None:
    """Java_com_google_ai_edge_litert_Environment_nativeCreate: the class's and the method's names."""
    assert (unkept(parse_rules(rules), {LITERT + "Environment"}) == []) is kept


@pytest.mark.parametrize("rules", [
    "-dontobfuscate",
    "-keep class com.google.ai.edge.litert.TensorType { <init>(...); } -ignorewarnings",
    "-keep @androidx.annotation.Keep class *",
    "-keep class * extends java.lang.Exception { <init>(...); }",
])
def test_unjudged_syntax_is_an_error(rules: str) -> None:
    """What the parser cannot judge fails loudly instead of passing unread."""
    with pytest.raises(ValueError):
        parse_rules(rules)


# ---- the kit's own use of LiteRT ------------------------------------------------------------------

def _kit_kotlin() -> dict[str, str]:
    """The kit's Kotlin sources (what the app compiles), by file name."""
    return {p.name: p.read_text(encoding="utf-8") for p in sorted(KIT_SOURCES.rglob("*.kt"))}


def _kit_litert_classes() -> set[str]:
    """The LiteRT classes the kit names: imports, and nested classes reached through them."""
    used: set[str] = set()
    for text in _kit_kotlin().values():
        imports = r"^import\s+((?:com\.google\.ai\.edge\.litert|org\.tensorflow\.lite)\.[\w.]+)\s*$"
        for full in re.findall(imports, text, re.M):
            used.add(full)
            simple = full.rsplit(".", 1)[1]
            used |= {f"{full}${inner}" for inner in re.findall(rf"\b{simple}\.([A-Z]\w*)\b", text)}
    return used


def test_kit_uses_only_covered_lookups() -> None:
    """Every LiteRT class the kit passes to or receives from LiteRT's native side (named in its
    Kotlin, or built by native code for a call it makes) is in the data above and kept."""
    used = _kit_litert_classes()
    assert {LITERT + "CompiledModel", LITERT + "TensorType", TFLITE + "Interpreter"} <= used, used  # the scan
    kit = "\n".join(_kit_kotlin().values())
    reached = set().union(*(KIT_REACHES.get(c, set()) for c in used))
    reached |= {c for c in used if c in {lk.cls for lk in JNI_LOOKUPS} | NATIVE_METHODS.keys()}
    for call, classes in KIT_CALLS_RECEIVING.items():
        if re.search(rf"\.{call}\(", kit):
            reached |= classes
    # The kit names LiteRT's element types (dtypeName) and reads the layout of what native code built.
    assert {LITERT + "LiteRtException", LITERT + "TensorType", ELEMENT_TYPE, LITERT + "TensorType$Layout",
            LITERT + "Environment", LITERT + "TensorBuffer", TFLITE + "NativeInterpreterWrapper"} <= reached
    assert unkept(_rules(), reached) == []


def test_kit_needs_no_rules_of_its_own() -> None:
    """The kit's classes are not reached by reflection, ServiceLoader or native code, so R8 may
    rename and shrink them: the rules file keeps nothing in dev.edgem3."""
    kit = "\n".join(_kit_kotlin().values())
    for pattern in (r"Class\.forName", r"ServiceLoader", r"java\.lang\.reflect", r"::class\.java",
                    r"\.getDeclared\w+\(", r"\.getMethod\(", r"\.getField\(", r"\.newInstance\(",
                    r"\bexternal\s+fun\b", r"System\.loadLibrary\("):
        hits = [m.group(0) for m in re.finditer(pattern, "\n".join(
            line.split("//")[0] for line in kit.splitlines() if not line.lstrip().startswith("*")))]
        assert hits == [], pattern
    assert not any(_class_matches(r, "dev.edgem3.EdgeM3Embedder") for r in _rules())


# ---- the merged manifest --------------------------------------------------------------------------

ANDROID_NS = "{http://schemas.android.com/apk/res/android}"
TOOLS_NS = "{http://schemas.android.com/tools}"


def test_manifest_removes_litert_permissions() -> None:
    """The kit's manifest removes exactly the permissions LiteRT's AAR declares, declares none
    itself, and binds the tools namespace the markers need."""
    text = (ANDROID / "src/main/AndroidManifest.xml").read_text(encoding="utf-8")
    assert 'xmlns:tools="http://schemas.android.com/tools"' in text
    root = ET.fromstring(text)
    assert root.tag == "manifest" and root.get("package") is None  # the namespace is build.gradle.kts's
    permissions = root.findall("uses-permission")
    removed = {p.get(f"{ANDROID_NS}name") for p in permissions if p.get(f"{TOOLS_NS}node") == "remove"}
    assert removed == LITERT_PERMISSIONS
    assert len(permissions) == len(removed), "the kit declares no permission of its own"
    assert [c.tag for c in root] == ["uses-permission"] * len(removed)
    # Only LiteRT's declarations: another library's foreground service keeps its permission.
    assert {p.get(f"{TOOLS_NS}selector") for p in permissions} == {LITERT_MANIFEST_PACKAGE}


def test_kit_does_not_use_the_removed_permissions() -> None:
    """FOREGROUND_SERVICE(_DATA_SYNC) serve LiteRT's AiPackModelProvider (on-demand AI pack
    downloads); the kit neither uses it nor starts a foreground service."""
    kit = "\n".join(_kit_kotlin().values())
    for needle in ("AiPackModelProvider", "ModelProvider", "com.google.ai.edge.litert.deployment",
                   "startForeground", "FOREGROUND_SERVICE", "android.app.Service"):
        assert needle not in kit, needle


def test_readme_explains_release_builds() -> None:
    """The README says what the rules keep and why, cites the LiteRT-LM report of the same crash,
    and says which permissions go and what the merger does with them."""
    readme = (ANDROID / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Release builds (R8)", 1)[1].split("\n## ", 1)[0]
    assert "consumer-rules.pro" in section and "consumerProguardFiles" in section
    assert "https://github.com/google-ai-edge/LiteRT-LM/issues/2406" in section
    for lookup in ("TensorType$ElementType", "TensorType$Layout", "LiteRtException", "TensorBufferRequirements",
                   "(ILjava/lang/String;)V", "([I)V", "native <methods>"):
        assert lookup in section, lookup
    permissions = readme.split("## Permissions LiteRT declares", 1)[1].split("\n## ", 1)[0]
    assert all(p in permissions for p in LITERT_PERMISSIONS)
    assert 'tools:node="remove"' in permissions
    assert "https://developer.android.com/build/manage-manifests" in permissions


# ---- the data against LiteRT's sources (EDGE_M3_LITERT_GIT) ----------------------------------------

def _litert_git() -> Path:
    """LiteRT's sources are not part of this repository: checked only where a copy is named."""
    git_dir = os.environ.get("EDGE_M3_LITERT_GIT")
    if not git_dir:
        pytest.skip("EDGE_M3_LITERT_GIT (a git directory of google-ai-edge/LiteRT) is not set")
    return Path(git_dir)


def _show(git_dir: Path, path: str) -> str:
    """A file of LiteRT at LITERT_TAG."""
    return subprocess.run(["git", "--git-dir", str(git_dir), "show", f"{LITERT_TAG}:{path}"],
                          check=True, capture_output=True, text=True).stdout


def _ls(git_dir: Path, folder: str) -> list[str]:
    """The files under a folder of LiteRT at LITERT_TAG."""
    out = subprocess.run(["git", "--git-dir", str(git_dir), "ls-tree", "-r", "--name-only", LITERT_TAG, folder],
                         check=True, capture_output=True, text=True).stdout
    return out.split()


def test_data_matches_litert_jni_sources() -> None:
    """The lookups and native methods above are all of those in LiteRT v2.2.0's JNI sources, at
    the cited lines."""
    git_dir = _litert_git()
    found: set[tuple[str, str | None, str | None]] = set()
    natives: dict[str, set[str]] = {}
    for path in _ls(git_dir, LITERT_JNI) + _ls(git_dir, TFLITE_JNI):
        if not path.endswith((".cc", ".h")):
            continue
        source = _show(git_dir, path)
        joined = re.sub(r'"\s*\n\s*"', "", source)  # C's adjacent string literals
        assert "RegisterNatives" not in source, path
        for cls in re.findall(r'FindClass\(\s*"([^"]+)"', joined):
            if not cls.startswith("java/"):
                found.add((cls.replace("/", "."), None, None))
        for var, name, desc in re.findall(r'GetMethodID\(\s*(\w+),\s*"([^"]+)",\s*"([^"]+)"', joined):
            owner = re.search(rf'{var}\s*=\s*(?:env->)?FindClass\w*\(\s*(?:env,\s*)?"([^"]+)"', joined)
            assert owner, (path, var, name)
            if not owner[1].startswith("java/"):
                found.add((owner[1].replace("/", "."), name, desc))
        for static in re.findall(r'GetStaticFieldID\(\s*(\w+),[^;]*?"([^"]+)"\s*\)', joined, re.S):
            var, desc = static
            owner = re.search(rf'{var}\s*=\s*env->FindClass\(\s*"([^"]+)"', joined)
            assert owner, path
            names = re.findall(r'element_type_name = "(\w+)"', joined)
            found |= {(owner[1].replace("/", "."), n, desc) for n in names}
        symbols = r"Java_((?:com_google_ai_edge_litert|org_tensorflow_lite)_[A-Za-z0-9]+)_(\w+?)\("
        for cls, method in re.findall(symbols, joined):
            natives.setdefault(cls.replace("_", "."), set()).add(method)
        for lk in JNI_LOOKUPS:
            if lk.source == path:
                first, last = (int(n) for n in (lk.lines.split("-") * 2)[:2])
                window = "\n".join(source.splitlines()[first - 1:last])
                assert lk.cls.replace(".", "/").rsplit("/", 1)[1] in window or (lk.member or "") in window, lk
    assert found == {(lk.cls, lk.member, lk.descriptor) for lk in JNI_LOOKUPS}
    assert natives == {cls: set(methods) for cls, (_, methods) in NATIVE_METHODS.items()}


def test_permissions_match_litert_aar_manifest() -> None:
    """The removed permissions are those of the manifest LiteRT's litert-aar target packages."""
    git_dir = _litert_git()
    build = _show(git_dir, "litert/kotlin/BUILD")
    target = build.split('name = "litert_for_maven"', 1)[1].split(")", 1)[0]
    assert 'manifest = "src/main/AndroidManifest.xml"' in target
    assert 'android_library = ":litert_for_maven"' in build.split('name = "litert-aar"', 1)[1].split(")", 1)[0]
    root = ET.fromstring(_show(git_dir, LITERT_MANIFEST))
    assert {p.get(f"{ANDROID_NS}name") for p in root.iter("uses-permission")} == LITERT_PERMISSIONS
    assert root.get("package") == LITERT_MANIFEST_PACKAGE
