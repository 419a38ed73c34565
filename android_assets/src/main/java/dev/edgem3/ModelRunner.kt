package dev.edgem3

import java.io.Closeable

// The runner interface and the IO every runner shares: which array goes to which input name,
// how flat float32 outputs become the manifest's shapes, and whether a model file's signatures
// are the manifest's. A runtime binding (ModelRunners.kt on a phone, jvm/LiteRtCRunner.kt on a
// desktop JVM) only moves bytes in and out; CI runs this code live through LiteRtCRunner.
// Stdlib only; Kotlin 1.3.

// The typed errors (EdgeM3ModelMismatchException, EdgeM3ClosedException, ...) are generated: EdgeM3Errors.kt.

/** A signature's outputs as the runtime fills them: batch of one, `null` for a head not exported. */
class RawOutputs(
    val denseVecs: Array<FloatArray>?,
    val sparseWeights: Array<FloatArray>?,
    val colbertVecs: Array<Array<FloatArray>>?
)

/** Runs one signature on `[1, L]` int32 ids and mask (a LiteRT model, or a replay in tests). */
interface ModelRunner {
    fun run(signature: Signature, inputIds: IntArray, attentionMask: IntArray): RawOutputs
}

/** A model opened on a runtime: runs the bundle's signatures; close() frees it. */
interface LoadedModel : ModelRunner, Closeable

object ModelIo {
    /** Values in a tensor of `shape`. */
    fun elements(shape: IntArray): Int = shape.fold(1) { a, b -> a * b }

    /** The signature's inputs by name, in the manifest's order: ids and mask, sizes checked. */
    fun inputs(signature: Signature, inputIds: IntArray, attentionMask: IntArray): Map<String, IntArray> {
        val out = LinkedHashMap<String, IntArray>()
        for (t in signature.inputs) {
            val values = when (t.name) {
                EdgeM3Contract.INPUT_IDS -> inputIds
                EdgeM3Contract.ATTENTION_MASK -> attentionMask
                else -> throw EdgeM3Exception("${signature.name}: unknown input ${t.name}")
            }
            if (values.size != elements(t.shape)) {
                throw EdgeM3Exception("${signature.name}.${t.name}: ${values.size} values, shape ${t.shape.toList()}")
            }
            out[t.name] = values
        }
        return out
    }

    /**
     * Raw outputs from flat float32 tensors (what LiteRT's buffers hold), shaped as the manifest
     * says: [1, H], [1, L], [1, L-1, H]; heads the signature lacks stay null.
     */
    fun outputs(signature: Signature, flat: (String) -> FloatArray): RawOutputs {
        fun rows(name: String): Array<FloatArray>? {
            val t = signature.output(name) ?: return null
            val values = flat(name)
            val width = t.shape[t.shape.size - 1]
            val n = elements(t.shape)
            if (values.size != n) throw EdgeM3Exception("$name: ${values.size} values, manifest shape ${t.shape.toList()}")
            return Array(n / width) { r -> values.copyOfRange(r * width, (r + 1) * width) }
        }
        return RawOutputs(rows(EdgeM3Contract.DENSE_VECS), rows(EdgeM3Contract.SPARSE_WEIGHTS),
            rows(EdgeM3Contract.COLBERT_VECS)?.let { arrayOf(it) })
    }

    /**
     * Throws unless every signature of the manifest is in the model with the same input and output
     * names, shapes and dtypes (`model`: the runtime's own view, by signature name). `where`: the file.
     */
    fun checkSignatures(where: String, manifest: List<Signature>, model: Map<String, Signature>) {
        for (s in manifest) {
            val m = model[s.name] ?: throw EdgeM3ModelMismatchException("$where: no signature ${s.name} (the model has " +
                "${model.keys.sorted()}); manifest.json and the model file disagree")
            checkTensors("$where: ${s.name} inputs", s.inputs, m.inputs)
            checkTensors("$where: ${s.name} outputs", s.outputs, m.outputs)
        }
    }

    private fun checkTensors(where: String, manifest: List<TensorSpec>, model: List<TensorSpec>) {
        val names = model.map { it.name }.sorted()
        if (manifest.map { it.name }.sorted() != names) {
            throw EdgeM3ModelMismatchException("$where: manifest.json says ${manifest.map { it.name }.sorted()}, the model has $names")
        }
        for (t in manifest) {
            val m = model.first { it.name == t.name }
            if (!m.shape.contentEquals(t.shape) || m.dtype != t.dtype) {
                throw EdgeM3ModelMismatchException("$where: ${t.name} is ${m.dtype}${m.shape.toList()} in the model, " +
                    "${t.dtype}${t.shape.toList()} in manifest.json")
            }
        }
    }
}
