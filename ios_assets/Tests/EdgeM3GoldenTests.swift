// XCTest template: the app's pipeline against the bundled golden.json.
import XCTest

final class EdgeM3GoldenTests: XCTestCase {
    let encoder: PieceEncoder = { fatalError("your SentencePiece binding over sentencepiece.bpe.model") }()

    func testReproducesGolden() throws {
        let dir = Bundle.main.resourceURL!.appendingPathComponent("EdgeM3Resources")
        let golden = try JSONSerialization.jsonObject(with: Data(contentsOf: dir.appendingPathComponent("golden.json"))) as! [String: Any]
        let embedder = try EdgeM3Embedder(resources: dir, encoder: encoder)
        for (i, c) in (golden["cases"] as! [[String: Any]]).enumerated() {
            let out = try embedder.embed(c["text"] as! String)
            XCTAssertEqual(out.inputIds, (c["input_ids"] as! [NSNumber]).map { $0.intValue }, "case \(i)")
            XCTAssertEqual(out.signature, c["signature"] as! String)
            let dense = (c["dense_vecs"] as! [NSNumber]).map { $0.floatValue }
            let dot = zip(dense, out.denseVecs).map(*).reduce(0, +)
            XCTAssertGreaterThan(dot, 0.999, "dense cosine on case \(i)")
            XCTAssertEqual((c["lexical_weights"] as! [String: Any]).count, out.lexicalWeights.count)
        }
    }
}
