"""Generate edge_m3/data/corpus_multilingual.txt: the tokenizer parity corpus.

    python -m tools.codegen.make_corpus            # rewrite the corpus
    python -m tools.codegen.make_corpus --check    # exit 1 if it is stale (make lint, the tests)

Hand-written sentences in 20 scripts, each also in variants that stress tokenizers (NFD,
runs of spaces, tabs, zero-width and control characters, full-width forms, emoji), plus
empty and whitespace-only lines and a few lines that tokenize past 8,192 tokens. One text
per line; read it with `split("\\n")`: some lines hold characters that `splitlines` breaks on.
"""

from __future__ import annotations

import sys
import unicodedata
from pathlib import Path

from tools.codegen import ROOT, generate

# Data, not code: one text per line and nothing else (no header line), so it stays in edge_m3/data/.
CORPUS = ROOT / "edge_m3/data/corpus_multilingual.txt"

SENTENCES = {
    "Korean": ["안녕하세요, 만나서 반갑습니다.", "오늘 서울의 날씨는 맑고 따뜻합니다.",
               "한국어 형태소 분석은 어렵지만 재미있어요.", "지하철 2호선을 타고 강남역에서 내리세요.",
               "이 문서는 검색 품질을 평가하기 위한 것입니다.", "김치찌개와 된장찌개 중에 무엇을 드시겠어요?"],
    "Japanese": ["東京タワーは何メートルですか？", "今日はとても良い天気ですね。",
                 "ひらがなとカタカナと漢字を混ぜて書きます。", "新幹線で大阪まで二時間半かかります。",
                 "この文書は検索の評価に使います。", "ラーメンとお寿司、どちらが好きですか。"],
    "Chinese": ["北京是中国的首都。", "我们明天下午三点在图书馆见面。", "機器學習模型需要大量的數據。",
                "这个句子没有空格但是很长很长。", "請問最近的地鐵站在哪裡？", "春眠不觉晓，处处闻啼鸟。"],
    "Thai": ["สวัสดีครับ ยินดีที่ได้รู้จัก", "วันนี้อากาศร้อนมาก", "ภาษาไทยไม่มีการเว้นวรรคระหว่างคำ",
             "กรุงเทพมหานครเป็นเมืองหลวงของประเทศไทย", "ขอบคุณมากค่ะ", "ร้านอาหารนี้อร่อยที่สุด"],
    "Arabic": ["مرحبا بالعالم", "ما هي عاصمة المملكة العربية السعودية؟", "اللغة العربية تكتب من اليمين إلى اليسار.",
               "ذهبتُ إلى السوقِ صباحاً", "الذكاء الاصطناعي يغير العالم", "كم سعر هذا الكتاب؟"],
    "Hebrew": ["שלום עולם", "מזג האוויר יפה היום", "העברית נכתבת מימין לשמאל.",
               "ירושלים היא עיר עתיקה", "תודה רבה על העזרה", "איפה התחנה המרכזית?"],
    "Hindi": ["नमस्ते, आप कैसे हैं?", "भारत की राजधानी नई दिल्ली है।", "मुझे हिंदी सीखना पसंद है।",
              "आज बहुत गर्मी है।", "यह दस्तावेज़ खोज के लिए है।", "क्या आप मेरी मदद कर सकते हैं?"],
    "Russian": ["Привет, мир!", "Как приготовить борщ дома?", "Москва — столица России.",
                "Съешь же ещё этих мягких французских булок.", "Ёжик в тумане.", "Где находится ближайшая аптека?"],
    "Ukrainian": ["Доброго ранку, Україно!", "Ґанок і їжак у саду.", "Київ — місто на Дніпрі.",
                  "Дякую за вашу допомогу.", "Щастя є!", "Яка сьогодні погода?"],
    "Greek": ["Γειά σου κόσμε", "Η Αθήνα είναι η πρωτεύουσα της Ελλάδας.", "Ξεσκεπάζω την ψυχοφθόρα βδελυγμία.",
              "Καλημέρα σας!", "Πόσο κοστίζει αυτό;", "Ἐν ἀρχῇ ἦν ὁ λόγος."],
    "French": ["Ça coûte combien, le café au lait ?", "Où est la bibliothèque municipale ?",
               "Les élèves étudient l'œuvre de Molière.", "Noël approche, à bientôt !",
               "Voilà une phrase très « française ».", "Je n'ai pas compris la réponse."],
    "German": ["Grüße aus München!", "Die Straße ist sehr schön.", "Ärzte, Öfen und Übungen.",
               "Donaudampfschifffahrtsgesellschaftskapitän", "Wie spät ist es?", "Fußgängerübergänge sind wichtig."],
    "Spanish": ["¿Dónde está la biblioteca?", "El niño comió piña en España.", "¡Qué día tan bonito!",
                "La canción del año", "Mañana iré al médico.", "Pingüinos en la Antártida."],
    "Vietnamese": ["Xin chào thế giới", "Tôi yêu tiếng Việt.", "Hà Nội là thủ đô của Việt Nam.",
                   "Phở bò rất ngon.", "Bạn có khỏe không?", "Cảm ơn bạn rất nhiều."],
    "Georgian": ["გამარჯობა მსოფლიო", "თბილისი საქართველოს დედაქალაქია.", "მადლობა", "როგორ ხარ?",
                 "ქართული ანბანი ლამაზია.", "დღეს კარგი ამინდია."],
    "Armenian": ["Բարեւ աշխարհ", "Երեւանը Հայաստանի մայրաքաղաքն է։", "Շնորհակալություն",
                 "Ինչպե՞ս ես", "Հայերեն այբուբեն", "Այսօր լավ եղանակ է։"],
    "Tamil": ["வணக்கம் உலகம்", "சென்னை தமிழ்நாட்டின் தலைநகரம்.", "நன்றி", "நீங்கள் எப்படி இருக்கிறீர்கள்?",
              "தமிழ் ஒரு பழமையான மொழி.", "இன்று மழை பெய்கிறது."],
    "Bengali": ["হ্যালো বিশ্ব", "ঢাকা বাংলাদেশের রাজধানী।", "ধন্যবাদ", "আপনি কেমন আছেন?",
                "বাংলা ভাষা সুন্দর।", "আজ আবহাওয়া ভালো।"],
    "Amharic": ["ሰላም ለዓለም", "አዲስ አበባ የኢትዮጵያ ዋና ከተማ ናት።", "አመሰግናለሁ", "እንዴት ነህ?",
                "አማርኛ ቋንቋ", "ዛሬ ጥሩ አየር ነው።"],
    "English": ["Hello world", "The quick brown fox jumps over the lazy dog.",
                "BGE-M3 supports dense, sparse and multi-vector retrieval.", "It's 3:45 p.m. on 2026-11-23.",
                "e-mail: someone@example.com, URL: https://example.org/a?b=c", "C++ & Python 3.11 (64-bit)"],
}

EXTRAS = [
    "👩🏽‍💻 coding", "👨‍👩‍👧‍👦 family", "🏳️‍🌈 flag", "👍🏿👍🏻 thumbs", "🧑🏾‍🚀 to the moon 🚀",
    "ＦＵＬＬＷＩＤＴＨ　ＴＥＸＴ　１２３", "ｶﾀｶﾅ ﾊﾝｶｸ", "① ② ③ Ⅻ ㍻ ㎞ ℃ ™ ﬁ ﬂ",
    "zero\u200bwidth\u200bspace", "join\u200dner and non\u200cjoiner", "\ufeffBOM at start",
    "soft\u00adhyphen", "nbsp\u00a0here\u202fand\u2009thin", "ctrl\x00nul\x01soh\x07bel\x1besc\x7fdel",
    "bidi \u202eoverride\u202c and \u2066isolate\u2069", "tab\tseparated\tvalues", "\t\tleading tabs",
    "trailing spaces   ", "   leading spaces", "runs    of     spaces", " ", "   ", "\t", "\u3000\u3000",
    "", "a", "\u0301 lone combining accent", "Z\u0351\u0364\u036b\u0343a\u0344l\u0346g\u0350o",
    "e\u0301e\u0300e\u0302 stacked marks", "한\u3000글 ideographic space", "mixed 中文 English 한국어 العربية",
    "1234567890 ٠١٢٣٤٥٦٧٨٩ १२३४५ 一二三", "¡¿‽⁇ «»„“”‚‘’ —–-", "math ∑∫√∞≈≠≤≥ ⊂⊃∀∃",
    "line\u2028separator and\u2029paragraph", "vertical\x0btab and form\x0cfeed", "next\x85line",
    # Special-token strings: the reference turns them into special ids wherever they occur.
    "special <s> tokens </s> in <pad> text <unk> and <mask>", "<mask>", "a<mask>b", "<s><s></s>",
    "near misses: < s> <S> <MASK> \uff1cmask\uff1e <mask <\u200bs> </ s>", "e<s>\u0301 and <unk>\u0301",
    "full-width specials \uff1cs\uff1e \uff1c/s\uff1e \uff1cpad\uff1e \uff1cunk\uff1e x\uff1cmask\uff1ey \ufe64s\ufe65 \u2603\uff1cunk\uff1e\u2603",
    "\u2581 meta \u2581\u2581 symbol\u2581inside \u2581", "\u2581\u2581",
    # Whitespace that Rust's char::is_whitespace and Python's str.isspace disagree on, and friends.
    "\u1680ogham\u2000en\u2001quad\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u200a\u205fend",
    "file\x1cgroup\x1drecord\x1eunit\x1fsep", "mongolian\u180evowel word\u2060joiner",
    "\U0001f1f0\U0001f1f7\U0001f1ef\U0001f1f5\U0001f1fa\U0001f1f3 flags 1\ufe0f\u20e3 #\ufe0f\u20e3 \u263a\ufe0f \u263a\ufe0e",
    "\U0001d573\U0001d58a\U0001d591\U0001d591\U0001d594 \U0001d4b2\u2134\U0001d4c7\U0001d4c1\U0001d4b9 \U00029e3d \U00020000 \U00013000",
    "private\ue000use\uf8ff replacement\ufffd nonchar\uffff",
    "\u1100\u1161\u11a8\u1100\u1161\u11a8 jamo \u1100\u1161\u11a8\u0301", "\u304b\u3099\u304d\u3099 \u30cf\u309a",
    "ddd dddd 0111 s74ddd1b 1111 0000 1010 aaaaaaaa",
    "virama after a space: \xa0\u094d\u0915\u094d\u0937 \u0132\u094d\u0915 \u0915\u200c\u094d\u0915 \u0915\u094d\u200d\u0937",
    "Unicode 17 marks: \u0132\u1aed \u0132\u0301\U00010ecb \ufb01\u05c8\u0301 \u0b53 \U0001d250",
]


def variants(s: str) -> list[str]:
    """The sentence, its NFD form, and forms with spacing/invisible/width noise."""
    nfd = unicodedata.normalize("NFD", s)
    return [
        s,
        nfd if nfd != s else s + " (NFD same)",
        "  " + s.replace(" ", "   ") + "  ",
        s.replace(" ", "\t") + "\u200b",
        unicodedata.normalize("NFKC", s).upper() + " 😀👍🏽",
        s + " " + "".join(chr(ord(c) + 0xFEE0) if "!" <= c <= "~" else c for c in "ABC 123!"),
    ]


def long_lines() -> list[str]:
    """Lines that tokenize well past 8,192 tokens (truncation must keep </s>)."""
    out = []
    for i, lang in enumerate(("English", "Korean", "Chinese")):
        chunk = " ".join(SENTENCES[lang]) + f" {i} "
        out.append((chunk * (60000 // len(chunk) + 1))[:60000])
    # One long "word" with no whitespace at all (Thai and Chinese, as written).
    chunk = "".join(SENTENCES["Thai"] + SENTENCES["Chinese"]).replace(" ", "")
    out.append((chunk * (20000 // len(chunk) + 1))[:20000])
    return out


def corpus() -> str:
    """The corpus file's text: every sentence's variants, the extras, the long lines."""
    lines: list[str] = []
    for sentences in SENTENCES.values():
        for s in sentences:
            lines.extend(variants(s))
    lines.extend(EXTRAS)
    lines.extend(long_lines())
    for line in lines:
        assert "\n" not in line and "\r" not in line
    return "\n".join(lines) + "\n"


def outputs() -> dict[Path, str]:
    """The corpus and its text."""
    return {CORPUS: corpus()}


def main(argv: list[str] | None = None) -> int:
    return generate("make_corpus", __doc__, outputs, argv)


if __name__ == "__main__":
    sys.exit(main())
