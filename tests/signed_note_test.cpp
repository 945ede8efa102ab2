// core/signed_note, core/checkpoint, core/tlog_proof: the C2SP text
// formats, checked against the published vectors of golang.org/x/mod's
// sumdb/note tests and of c2sp.org/signed-note, and against refusals.
#include "core/signed_note.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/checkpoint.h"
#include "core/tlog_proof.h"

namespace tollgate {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

const std::string kDash = "\xE2\x80\x94";  // U+2014

// golang.org/x/mod/sumdb/note's test keys and note.
const char kPeterKey[] = "PeterNeumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW";
const char kPeterPrivate[] = "AYEKFALVFGyNhPJEMzD1QIDr+Y7hfZx09iUvxdXHKDFz";  // 0x01 || seed
const char kEnochKey[] = "EnochRoot+af0cfe78+ATtqJ7zOtqQtYqOo0CpvDXNlMhV3HeJDpjrASKGLWdop";
const std::string kText =
    "If you think cryptography is the answer to your problem,\n"
    "then you don't know what your problem is.\n";
const std::string kPeterSig =
    kDash +
    " PeterNeumann "
    "x08go/ZJkuBS9UG/SffcvIAQxVBtiFupLLr8pAcElZInNIuGUgYN1FFYC2pZSNXgKvqfqdngotpRZb6KE6RyyBwJnAM=\n";
const std::string kEnochSig =
    kDash +
    " EnochRoot "
    "rwz+eBzmZa0SO3NbfRGzPCpDckykFXSdeX+MNtCOXm2/5n2tiOHp+vAF1aGrQ5ovTG01oOTGwnWLox33WWd1RvMc+QQ=\n";

// A cosignature (type 0x04) made from the tlog-cosignature spec by an
// independent script (Python's `cryptography`): seed bytes 0..31, time
// 1679315147, over the spec's example checkpoint.
const char kWitnessKey[] = "witness.example/w1+e75f6532+BAOhB7/zzhC+HXDdGOdLwJln5NYwm6UNXx3chmQSVTG4";
const std::string kSofaText =
    "example.com/behind-the-sofa\n20852163\nCsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=\n";
const std::string kWitnessSig =
    kDash +
    " witness.example/w1 519lMgAAAABkGFDLBuRDazBLVac2NE+Y+IjbjQOcXLfF9CSDZVUIoS83rE1nFZsV"
    "E8YiWV6Ngr7lV8H6bdoBQGP/l73euDMQ9k+bBQ==\n";

NoteVerifier Key(const std::string& vkey) {
  NoteVerifier v;
  Status s = ParseVerifierKey(vkey, &v);
  EXPECT_TRUE(s.ok()) << vkey << ": " << s.ToString();
  return v;
}

// Parses and verifies; the status of whichever step fails.
Status Open(const std::string& note, const std::vector<NoteVerifier>& known,
            std::vector<std::string>* names = nullptr) {
  SignedNote n;
  Status s = ParseNote(note, &n);
  return s.ok() ? VerifyNote(n, known, names) : s;
}

std::string Seed(char fill) { return std::string(32, fill); }

TEST(Base64Std, RoundTripsAndRefusesOtherSpellings) {
  for (std::string bytes : {std::string(""), std::string("f"), std::string("fo"), std::string("foo"),
                            std::string("foob"), std::string("\xff\xfe\x00", 3)}) {
    std::string back;
    ASSERT_TRUE(Base64StdDecode(Base64StdEncode(bytes), &back)) << bytes;
    EXPECT_EQ(back, bytes);
  }
  EXPECT_EQ(Base64StdEncode("\xfb\xff"), "+/8=");
  std::string out = "untouched";
  for (const char* bad :
       {"Zg", "Zg=", "Zm8", "Zh==", "-_8=", "====", "A===", "Zg==Zg==", "Zm9v\n", " Zm9v"}) {
    EXPECT_FALSE(Base64StdDecode(bad, &out)) << bad;
  }
  EXPECT_EQ(out, "untouched");
}

TEST(VerifierKey, ParsesTheGoVectorAndRefusesManglings) {
  NoteVerifier v = Key(kPeterKey);
  EXPECT_EQ(v.name(), "PeterNeumann");
  EXPECT_EQ(v.KeyHash(), 0xc74f20a3u);
  EXPECT_EQ(v.type(), kNoteKeyEd25519);
  EXPECT_EQ(FormatVerifierKey(v), kPeterKey);
  std::string key = kPeterKey;
  for (size_t i = 0; i < key.size(); ++i) {
    std::string mangled = key;
    mangled[i] = static_cast<char>(mangled[i] + 1);
    EXPECT_FALSE(ParseVerifierKey(mangled, &v).ok()) << mangled;
    EXPECT_FALSE(ParseVerifierKey(key.substr(0, i), &v).ok()) << i;
  }
  for (const char* bad : {
           "PeterNeumann+C74F20A3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW",  // uppercase hex
           "PeterNeumann+173116ae+ZRpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW",  // unknown type
           "PeterNeumann+cc469956+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TWBADKEY==",
           "Peter Neumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW",
       }) {
    Status s = ParseVerifierKey(bad, &v);
    EXPECT_EQ(s.code(), errc::kInvalidKey) << bad;
  }
}

TEST(SignedNote, VerifiesTheGoVectors) {
  std::vector<std::string> names;
  Status s = Open(kText + "\n" + kPeterSig + kEnochSig, {Key(kPeterKey)}, &names);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_THAT(names, ElementsAre("PeterNeumann"));  // Enoch's line: unknown, ignored
  s = Open(kText + "\n" + kPeterSig + kEnochSig, {Key(kEnochKey), Key(kPeterKey)}, &names);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_THAT(names, ElementsAre("PeterNeumann", "EnochRoot"));
  s = Open(kText + "\n" + kPeterSig + kEnochSig, {});
  EXPECT_EQ(s.code(), errc::kNoteUnverified);
  EXPECT_THAT(s.message(), HasSubstr("no known key"));

  SignedNote n;
  ASSERT_TRUE(ParseNote(kText + "\n" + kPeterSig + kEnochSig, &n).ok());
  EXPECT_EQ(n.text, kText);
  ASSERT_EQ(n.sigs.size(), 2u);
  EXPECT_EQ(n.sigs[0].key_hash, 0xc74f20a3u);
  EXPECT_EQ(n.sigs[1].key_hash, 0xaf0cfe78u);
  EXPECT_EQ(FormatNote(n), kText + "\n" + kPeterSig + kEnochSig);
}

TEST(SignedNote, SignerReproducesTheGoSignature) {
  std::string priv;
  ASSERT_TRUE(Base64StdDecode(kPeterPrivate, &priv));
  ASSERT_EQ(priv.size(), 33u);
  NoteSigner signer;
  ASSERT_TRUE(NoteSigner::FromSeed("PeterNeumann", priv.substr(1), &signer).ok());
  EXPECT_EQ(signer.KeyHash(), 0xc74f20a3u);
  EXPECT_EQ(signer.VerifierKey(), kPeterKey);
  EXPECT_EQ(FormatNote({kText, {signer.Sign(kText)}}), kText + "\n" + kPeterSig);
}

TEST(SignedNote, VerifiesTheSpecExample) {
  std::string note =
      "This is an example message.\n\n" + kDash +
      " example.com/foo Uw2QOkn8srV1yJGh2VYRlL1Tnagv1YEq6TfXppzi2ONncAlTgK7Ztg1ERYNZXsYjOBH3mFXmRKuw"
      "HjG1Yu72IneyaQM=\n";
  Status s = Open(note, {Key("example.com/foo+530d903a+AekyeRrm56hApGFkyQR4ZCbV54Id2LKaANYcrnKv3U2k")});
  EXPECT_TRUE(s.ok()) << s.ToString();
}

TEST(SignedNote, RoundTripsWithTextBlankLinesAndPem) {
  std::string pem, pub;
  ASSERT_TRUE(Ed25519FromSeed(Seed('k'), &pem, &pub).ok());
  NoteSigner a, b;
  ASSERT_TRUE(NoteSigner::FromPem("log.example/a", pem, &a).ok());
  ASSERT_TRUE(NoteSigner::FromSeed("log.example/a", Seed('k'), &b).ok());
  EXPECT_EQ(a.public_key(), b.public_key());
  SignedNote note{"line one\n\nline three\n", {}};  // the text ends at the last blank line
  note.sigs.push_back(a.Sign(note.text));
  SignedNote back;
  ASSERT_TRUE(ParseNote(FormatNote(note), &back).ok());
  EXPECT_EQ(back.text, note.text);
  ASSERT_EQ(back.sigs.size(), 1u);
  EXPECT_EQ(back.sigs[0].sig, note.sigs[0].sig);
  EXPECT_TRUE(VerifyNote(back, {a.Verifier()}).ok());
  EXPECT_EQ(NoteSigner::FromPem("x", "not a key", &a).code(), errc::kInvalidKey);
  EXPECT_EQ(NoteSigner::FromSeed("a+b", Seed('k'), &a).code(), errc::kInvalidKey);
  EXPECT_EQ(NoteSigner::FromSeed("x", "short", &a).code(), errc::kInvalidKey);
}

TEST(SignedNote, RefusesTamperingAndDuplicates) {
  NoteVerifier peter = Key(kPeterKey);
  std::string tampered = kText;
  tampered[0] = 'i';
  EXPECT_EQ(Open(tampered + "\n" + kPeterSig, {peter}).code(), errc::kNoteUnverified);
  // Another signature under Peter's name and key ID: must verify, fails.
  std::string bad_sig = kPeterSig;
  bad_sig[kDash.size() + 20] = bad_sig[kDash.size() + 20] == 'A' ? 'B' : 'A';
  Status s = Open(kText + "\n" + bad_sig, {peter});
  EXPECT_EQ(s.code(), errc::kNoteUnverified);
  EXPECT_THAT(s.message(), HasSubstr("PeterNeumann+c74f20a3 does not verify"));
  // A wrong key ID makes the line another key's: ignored, so nothing verifies.
  std::string wrong_hash = kPeterSig;
  wrong_hash.replace(kDash.size() + 14, 4, "y08g");
  EXPECT_EQ(Open(kText + "\n" + wrong_hash, {peter}).code(), errc::kNoteUnverified);
  s = Open(kText + "\n" + kPeterSig + kPeterSig, {peter});
  EXPECT_EQ(s.code(), errc::kNoteUnverified);
  EXPECT_THAT(s.message(), HasSubstr("two signatures"));
  EXPECT_TRUE(Open(kText + "\n" + kPeterSig + kEnochSig + kEnochSig, {peter}).ok());  // unknown: ignored
}

TEST(SignedNote, RefusesMalformedNotes) {
  std::vector<std::string> bad = {
      kText,                                                            // no signatures
      kText + "\n",                                                     // no signature line
      kText + kPeterSig,                                                // no blank line
      kText + "\n" + kPeterSig.substr(0, kPeterSig.size() - 1),         // no final newline
      kText + "\n" + kPeterSig.substr(0, kPeterSig.size() - 6) + "\n",  // truncated base64
      kText + "\n- " + kPeterSig.substr(kDash.size() + 1),              // a hyphen, not an em dash
      kText + "\n" + kDash + "PeterNeumann AAAA\n",                     // no space after the dash
      kText + "\n" + kDash + " Peter+Neumann " + kPeterSig.substr(kDash.size() + 14),
      kText + "\n" + kDash + " PeterNeumann AAAAAA==\n",  // 4 bytes: a key ID, no signature
      kText + "\n" + kPeterSig + "Unexpected line.\n",
      "\x01" + kText + "\n" + kPeterSig,      // control character
      "\xff" + kText + "\n" + kPeterSig,      // not UTF-8
      "\xc0\xaf" + kText + "\n" + kPeterSig,  // overlong UTF-8
      kText + "\r\n" + kPeterSig,
      std::string(kMaxNoteBytes, 'a') + "\n\n" + kPeterSig,
  };
  std::string many = kText + "\n";
  for (size_t i = 0; i <= kMaxNoteSignatures; ++i) many += kEnochSig;
  bad.push_back(many);
  for (const std::string& note : bad) {
    SignedNote n;
    EXPECT_EQ(ParseNote(note, &n).code(), errc::kNoteMalformed) << note.substr(0, 200);
  }
}

Checkpoint Sample() {
  Checkpoint cp;
  cp.origin = "tollgate.example/log";
  cp.size = 20852163;
  for (size_t i = 0; i < cp.root.size(); ++i) cp.root[i] = static_cast<uint8_t>(i * 7);
  return cp;
}

TEST(Checkpoint, TextRoundTripsAndParsesTheSpecExample) {
  Checkpoint cp = Sample();
  cp.extensions = {"ext one", "ext two"};
  Checkpoint back;
  ASSERT_TRUE(ParseCheckpointText(CheckpointText(cp), &back).ok());
  EXPECT_EQ(back.origin, cp.origin);
  EXPECT_EQ(back.size, cp.size);
  EXPECT_EQ(back.root, cp.root);
  EXPECT_EQ(back.extensions, cp.extensions);
  ASSERT_TRUE(ParseCheckpointText(kSofaText, &back).ok());
  EXPECT_EQ(back.origin, "example.com/behind-the-sofa");
  EXPECT_EQ(back.size, 20852163u);
  EXPECT_EQ(CheckpointText(back), kSofaText);
  ASSERT_TRUE(
      ParseCheckpointText("o\n18446744073709551615\n" + Base64StdEncode(std::string(32, 'r')) + "\n", &back)
          .ok());
  EXPECT_EQ(back.size, UINT64_MAX);
}

TEST(Checkpoint, RefusesMalformedTexts) {
  std::string root = Base64StdEncode(std::string(32, 'r')) + "\n";
  for (const std::string& text : {
           "o\n0\n" + root.substr(0, root.size() - 1),  // no final newline
           "\n0\n" + root,                              // empty origin
           "o\n00\n" + root,                            // leading zero
           "o\n012\n" + root, "o\n-1\n" + root, "o\n+1\n" + root,
           "o\n18446744073709551616\n" + root,  // over 64 bits
           "o\n1\n" + Base64StdEncode(std::string(31, 'r')) + "\n",
           "o\n1\n" + root + "\n",  // empty extension line
           std::string("o\n1\n"),   // no root
           "o\x01\n1\n" + root,     // control character
       }) {
    Checkpoint cp;
    EXPECT_EQ(ParseCheckpointText(text, &cp).code(), errc::kNoteMalformed) << text;
  }
}

TEST(Checkpoint, SignsAndOpens) {
  NoteSigner log, other;
  ASSERT_TRUE(NoteSigner::FromSeed("tollgate.example/log", Seed('l'), &log).ok());
  ASSERT_TRUE(NoteSigner::FromSeed("tollgate.example/other", Seed('o'), &other).ok());
  std::string note = SignCheckpoint(Sample(), log);
  Checkpoint cp;
  Status s = OpenCheckpoint(note, log.Verifier(), &cp);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(cp.size, Sample().size);
  EXPECT_EQ(OpenCheckpoint(note, other.Verifier(), &cp).code(), errc::kNoteUnverified);
  // Signed by a key whose name is not the origin.
  s = OpenCheckpoint(SignCheckpoint(Sample(), other), other.Verifier(), &cp);
  EXPECT_EQ(s.code(), errc::kNoteUnverified);
  EXPECT_THAT(s.message(), HasSubstr("origin"));
}

TEST(Cosignature, MatchesTheIndependentVectorAndCountsAQuorum) {
  NoteVerifier witness = Key(kWitnessKey);
  EXPECT_EQ(witness.type(), kNoteKeyCosignatureV1);
  SignedNote note;
  ASSERT_TRUE(ParseNote(kSofaText + "\n" + kWitnessSig, &note).ok());
  std::vector<std::string> names;
  Status s = VerifyCosignatures(note, {witness}, 1, &names);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_THAT(names, ElementsAre("witness.example/w1"));
  uint64_t t = 0;
  ASSERT_TRUE(CosignatureTime(note.sigs[0], &t));
  EXPECT_EQ(t, 1679315147u);
  EXPECT_EQ(VerifyCosignatures(note, {witness}, 2).code(), errc::kNoteUnverified);
  EXPECT_TRUE(VerifyCosignatures(note, {}, 0).ok());

  std::string seed;
  for (int i = 0; i < 32; ++i) seed += static_cast<char>(i);
  NoteSigner signer;
  ASSERT_TRUE(NoteSigner::FromSeed("witness.example/w1", seed, &signer, kNoteKeyCosignatureV1).ok());
  EXPECT_EQ(signer.VerifierKey(), kWitnessKey);
  EXPECT_EQ(FormatNote({kSofaText, {Cosign(signer, kSofaText, 1679315147)}}), kSofaText + "\n" + kWitnessSig);
  EXPECT_THROW(signer.Sign(kSofaText), std::logic_error);

  // Another checkpoint, or another time, under the same line fails.
  SignedNote moved = note;
  moved.text = "example.com/behind-the-sofa\n20852164\nCsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=\n";
  EXPECT_EQ(VerifyCosignatures(moved, {witness}, 1).code(), errc::kNoteUnverified);
  moved = note;
  moved.sigs[0].sig[7] = static_cast<char>(moved.sigs[0].sig[7] + 1);
  EXPECT_EQ(VerifyCosignatures(moved, {witness}, 1).code(), errc::kNoteUnverified);
}

TEST(TlogProof, RoundTripsTheSpecLayout) {
  NoteSigner log;
  ASSERT_TRUE(NoteSigner::FromSeed("tollgate.example/log", Seed('l'), &log).ok());
  TlogProof proof;
  proof.extra = std::string("age-v1.2.1-darwin-arm64.tar.gz");
  proof.index = 73894;
  for (const char* h :
       {"gSKyXoYZUgZ6jduWYrkDOARinOMGJveXjgMkBTcdPlQ=", "B95lDa8R83lS8n0eG+o0buTxRKQTYFi//1U8anccXmA=",
        "EKNzoDWG8LGC0Yp9o+sv3qllpMP9uHQ9B20KNL+Q1zs="}) {
    std::string bytes;
    ASSERT_TRUE(Base64StdDecode(h, &bytes));
    Digest d;
    std::copy(bytes.begin(), bytes.end(), d.begin());
    proof.hashes.push_back(d);
  }
  proof.checkpoint = SignCheckpoint(Sample(), log);
  std::string text = FormatTlogProof(proof);
  EXPECT_EQ(text,
            "c2sp.org/tlog-proof@v1\nextra YWdlLXYxLjIuMS1kYXJ3aW4tYXJtNjQudGFyLmd6\nindex 73894\n"
            "gSKyXoYZUgZ6jduWYrkDOARinOMGJveXjgMkBTcdPlQ=\nB95lDa8R83lS8n0eG+o0buTxRKQTYFi//1U8anccXmA=\n"
            "EKNzoDWG8LGC0Yp9o+sv3qllpMP9uHQ9B20KNL+Q1zs=\n\n" +
                proof.checkpoint);
  TlogProof back;
  Status s = ParseTlogProof(text, &back);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(back.extra, proof.extra);
  EXPECT_EQ(back.index, proof.index);
  EXPECT_EQ(back.hashes, proof.hashes);
  EXPECT_EQ(back.checkpoint, proof.checkpoint);
  proof.extra.reset();
  proof.hashes.clear();
  proof.index = 0;
  ASSERT_TRUE(ParseTlogProof(FormatTlogProof(proof), &back).ok());
  EXPECT_FALSE(back.extra.has_value());
  EXPECT_TRUE(back.hashes.empty());
}

TEST(TlogProof, RefusesMalformedProofs) {
  NoteSigner log;
  ASSERT_TRUE(NoteSigner::FromSeed("tollgate.example/log", Seed('l'), &log).ok());
  std::string cp = SignCheckpoint(Sample(), log);
  std::string h = Base64StdEncode(std::string(32, 'h')) + "\n";
  std::string many;
  for (size_t i = 0; i <= kMaxProofHashes; ++i) many += h;
  for (const std::string& text : {
           "c2sp.org/tlog-proof@v2\nindex 1\n" + h + "\n" + cp,
           "c2sp.org/tlog-proof@v1\nindex 01\n" + h + "\n" + cp,
           "c2sp.org/tlog-proof@v1\nindex\n" + h + "\n" + cp,
           "c2sp.org/tlog-proof@v1\nextra !!\nindex 1\n" + h + "\n" + cp,
           "c2sp.org/tlog-proof@v1\nindex 1\nextra AAAA\n" + h + "\n" + cp,
           "c2sp.org/tlog-proof@v1\nindex 1\n" + h.substr(4) + "\n" + cp,
           "c2sp.org/tlog-proof@v1\nindex 1\n" + h + cp,  // no blank line: the checkpoint is read as hashes
           "c2sp.org/tlog-proof@v1\nindex 1\n" + h + "\n" + cp.substr(0, cp.size() - 1),
           "c2sp.org/tlog-proof@v1\nindex 1\n" + h + "\n" + "not a checkpoint\n\n" +
               cp.substr(cp.find(kDash)),
           "c2sp.org/tlog-proof@v1\nindex 1\n" + many + "\n" + cp,
       }) {
    TlogProof p;
    EXPECT_EQ(ParseTlogProof(text, &p).code(), errc::kNoteMalformed) << text;
  }
}

TEST(ConsistencyProof, RoundTripsAndRefusesMalformedProofs) {
  ConsistencyProof proof{3, 7, {}};
  Digest d{};
  d[0] = 1;
  proof.hashes = {d, Digest{}};
  std::string text = FormatConsistencyProof(proof);
  EXPECT_EQ(text, "tollgate.dev/tlog-consistency@v1\nold 3\nnew 7\n" +
                      Base64StdEncode(std::string("\x01") + std::string(31, '\0')) + "\n" +
                      Base64StdEncode(std::string(32, '\0')) + "\n");
  ConsistencyProof back;
  ASSERT_TRUE(ParseConsistencyProof(text, &back).ok());
  EXPECT_EQ(back.old_size, 3u);
  EXPECT_EQ(back.new_size, 7u);
  EXPECT_EQ(back.hashes, proof.hashes);
  std::string h = Base64StdEncode(std::string(32, 'h')) + "\n";
  for (const std::string& bad : {
           "tollgate.dev/tlog-consistency@v1\nold 8\nnew 7\n" + h,
           "tollgate.dev/tlog-consistency@v1\nnew 7\nold 3\n" + h,
           "tollgate.dev/tlog-consistency@v1\nold 3\nnew 7\n" + h + "\n",
           "tollgate.dev/tlog-consistency@v1\nold 3\nnew 7\n" + h.substr(0, h.size() - 1),
           "tollgate.dev/tlog-consistency@v1\nold 3\nnew 07\n" + h,
           "c2sp.org/tlog-proof@v1\nold 3\nnew 7\n" + h,
       }) {
    EXPECT_EQ(ParseConsistencyProof(bad, &back).code(), errc::kNoteMalformed) << bad;
  }
}

// Adversarial input: every prefix of valid texts, and many random byte
// edits of them, are parsed without a crash or an exception (run under the
// sanitizers in CI); an accepted note re-formats to the same bytes.
TEST(Parsers, SurviveTruncationAndRandomEdits) {
  NoteSigner log;
  ASSERT_TRUE(NoteSigner::FromSeed("tollgate.example/log", Seed('l'), &log).ok());
  TlogProof proof;
  proof.extra = std::string("x");
  proof.index = 5;
  proof.hashes = {Digest{}, Digest{}};
  proof.checkpoint = SignCheckpoint(Sample(), log);
  std::vector<std::string> inputs = {FormatTlogProof(proof), proof.checkpoint,
                                     kText + "\n" + kPeterSig + kEnochSig,
                                     FormatConsistencyProof({1, 2, {Digest{}}})};
  uint32_t state = 12345;
  auto next = [&state] { return state = state * 1103515245u + 12345u; };
  for (const std::string& valid : inputs) {
    for (size_t cut = 0; cut <= valid.size() + 500; ++cut) {
      std::string text = cut <= valid.size() ? valid.substr(0, cut) : valid;
      if (cut > valid.size()) {
        for (int edits = 1 + next() % 3; edits > 0; --edits)
          text[next() % text.size()] = static_cast<char>(next() >> 8);
      }
      SignedNote n;
      if (ParseNote(text, &n).ok()) {
        EXPECT_EQ(FormatNote(n), text);
        (void)VerifyNote(n, {log.Verifier(), Key(kPeterKey)});
      }
      Checkpoint cp;
      (void)ParseCheckpointText(text, &cp);
      TlogProof p;
      if (ParseTlogProof(text, &p).ok()) {
        EXPECT_EQ(FormatTlogProof(p), text);
      }
      ConsistencyProof c;
      if (ParseConsistencyProof(text, &c).ok()) {
        EXPECT_EQ(FormatConsistencyProof(c), text);
      }
    }
  }
}

}  // namespace
}  // namespace tollgate
