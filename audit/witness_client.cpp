#include "audit/witness_client.h"

#include <algorithm>

#include "core/log.h"

namespace tollgate {
namespace {

std::string S(uint64_t n) { return std::to_string(n); }

bool SameKey(const NoteSignature& sig, const NoteVerifier& key) {
  return sig.name == key.name() && sig.key_hash == key.KeyHash();
}

// The first line of a witness's answer, for an error message.
std::string Excerpt(const std::string& body) {
  std::string line = body.substr(0, std::min(body.find('\n'), size_t{200}));
  for (char& c : line) {
    if (static_cast<unsigned char>(c) < 0x20) c = ' ';
  }
  return line;
}

}  // namespace

Status ParseWitnessFlag(std::string_view flag, WitnessEndpoint* out) {
  // The URL may hold '=' (a query); a cosignature vkey holds none (its 33
  // bytes take no base64 padding): the key is after the last '='.
  const size_t eq = flag.rfind('=');
  if (eq == std::string_view::npos) {
    return Status::Error(errc::kInvalidQuery, "a witness is URL=VERIFIER_KEY, not " + std::string(flag));
  }
  WitnessEndpoint w;
  w.url = std::string(flag.substr(0, eq));
  while (!w.url.empty() && w.url.back() == '/') w.url.pop_back();
  if (w.url.rfind("http://", 0) != 0 && w.url.rfind("https://", 0) != 0) {
    return Status::Error(errc::kInvalidQuery, "a witness URL is http:// or https://, not " + w.url);
  }
  Status s = ParseVerifierKey(flag.substr(eq + 1), &w.key);
  if (!s.ok()) return s;
  if (w.key.type() != kNoteKeyCosignatureV1) {
    return Status::Error("E_INVALID_KEY",
                         "witness key " + w.key.name() + " is not a cosignature/v1 key (type 4)");
  }
  *out = std::move(w);
  return Status::Ok();
}

std::string AddCheckpointBody(uint64_t old_size, const std::vector<merkle::Hash>& proof,
                              std::string_view note) {
  std::string body = "old " + S(old_size) + "\n";
  for (const merkle::Hash& h : proof) {
    body += Base64StdEncode(std::string_view(reinterpret_cast<const char*>(h.data()), h.size()));
    body += '\n';
  }
  body += '\n';
  body += note;
  return body;
}

Witnesses::Witnesses(const merkle::SubtreeSource& tree, CosignedStore store, WitnessOptions options)
    : tree_(tree),
      store_(std::move(store)),
      options_(std::move(options)),
      known_(options_.witnesses.size(), 0) {}

Status Witnesses::Start(const merkle::SubtreeSource& tree, CosignedStore store, WitnessOptions options,
                        std::unique_ptr<Witnesses>* out) {
  if (!options.post) return Status::Error(errc::kInvalidQuery, "witnesses need an HTTP client");
  if (options.quorum == 0) options.quorum = options.witnesses.size();
  if (options.quorum > options.witnesses.size()) {
    return Status::Error(errc::kInvalidQuery,
                         "a witness quorum of " + S(options.quorum) + " needs that many witnesses");
  }
  for (const WitnessEndpoint& w : options.witnesses) {
    if (w.key.type() != kNoteKeyCosignatureV1)
      return Status::Error(errc::kInvalidQuery, "witness " + w.url + " has no cosignature/v1 key");
  }
  std::unique_ptr<Witnesses> w(new Witnesses(tree, std::move(store), std::move(options)));
  w->thread_ = std::thread([p = w.get()] { p->Run(); });
  *out = std::move(w);
  return Status::Ok();
}

Witnesses::~Witnesses() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Witnesses::Offer(uint64_t size, std::string note) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (size < offered_size_ || size <= cosigned_.load()) return;
    offered_size_ = size;
    offered_ = std::move(note);
  }
  wake_.notify_all();
}

Status Witnesses::last_error() const {
  std::lock_guard<std::mutex> lock(mu_);
  return last_error_;
}

void Witnesses::Run() {
  auto backoff = std::chrono::milliseconds(500);
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    wake_.wait(lock, [&] { return stop_ || !offered_.empty(); });
    if (stop_) break;
    const uint64_t size = offered_size_;
    const std::string note = offered_;
    lock.unlock();
    std::string missing;  // the witnesses that did not cosign, when the quorum did
    Status s = Round(size, note, &missing);
    lock.lock();
    if (s.ok()) {
      if (offered_size_ == size) offered_.clear();  // else a newer one waits
      last_error_ = missing.empty() ? Status::Ok() : Status::Error(errc::kNoteUnverified, missing);
      backoff = std::chrono::milliseconds(500);
      continue;
    }
    if (last_error_.ToString() != s.ToString())
      log::Warn({"checkpoint", "", ""}) << "witnesses: " << s.ToString() << "\n";
    last_error_ = s;
    // Retried later (the latest offered checkpoint then), never in a loop.
    wake_.wait_for(lock, backoff, [&] { return stop_ || offered_size_ > size; });
    backoff = std::min(backoff * 2, options_.max_backoff);
  }
}

// Asks every witness; stores the note with the cosignatures once the
// quorum signed. Every witness is asked even after the quorum, so each
// keeps up with the log. Ok once stored; *missing then names the
// witnesses that did not cosign and why.
Status Witnesses::Round(uint64_t size, const std::string& note, std::string* missing) {
  SignedNote cosigned;
  Status s = ParseNote(note, &cosigned);
  if (!s.ok()) return s;
  // Lines of our witnesses from an earlier round go: each key signs once.
  std::erase_if(cosigned.sigs, [&](const NoteSignature& sig) {
    return std::any_of(options_.witnesses.begin(), options_.witnesses.end(),
                       [&](const WitnessEndpoint& w) { return SameKey(sig, w.key); });
  });
  const std::string plain = FormatNote(cosigned);
  size_t signers = 0;
  std::string errors;
  for (size_t i = 0; i < options_.witnesses.size(); ++i) {
    std::vector<NoteSignature> lines;
    Status one = AskOne(i, size, plain, &lines);
    if (one.ok()) {
      ++signers;
      cosigned.sigs.insert(cosigned.sigs.end(), lines.begin(), lines.end());
    } else {
      ++failures;
      errors += (errors.empty() ? "" : "; ") + options_.witnesses[i].url + ": " + one.message();
    }
  }
  if (signers < options_.quorum) {
    return Status::Error(errc::kNoteUnverified, S(signers) + " of " + S(options_.witnesses.size()) +
                                                    " witnesses cosigned the checkpoint of size " + S(size) +
                                                    ", the quorum is " + S(options_.quorum) + " (" + errors +
                                                    ")");
  }
  s = store_(size, FormatNote(cosigned));
  if (!s.ok()) return s;
  cosigned_.store(std::max(cosigned_.load(), size));
  ++rounds;
  if (!errors.empty()) *missing = "the quorum cosigned size " + S(size) + ", but " + errors;
  return Status::Ok();
}

Status Witnesses::Post(size_t i, uint64_t old_size, uint64_t size, const std::string& note,
                       WitnessReply* reply) {
  std::vector<merkle::Hash> proof;
  Status s = merkle::ConsistencyProof(tree_, old_size, size, &proof);
  if (s.ok())
    s = options_.post(options_.witnesses[i].url + "/add-checkpoint", AddCheckpointBody(old_size, proof, note),
                      reply);
  return s;
}

Status Witnesses::AskOne(size_t i, uint64_t size, const std::string& note,
                         std::vector<NoteSignature>* lines) {
  const WitnessEndpoint& w = options_.witnesses[i];
  WitnessReply reply;
  for (int attempt = 0;; ++attempt) {
    if (known_[i] > size) {
      return Status::Error(errc::kNoteUnverified,
                           "the witness cosigned size " + S(known_[i]) + ", past " + S(size));
    }
    reply = WitnessReply{};  // the transport appends to the body
    Status s = Post(i, known_[i], size, note, &reply);
    if (!s.ok()) return s;
    uint64_t theirs = 0;
    // 409 with its size: it cosigned before (another process, a restart).
    if (reply.status == 409 && attempt == 0 && reply.content_type.rfind("text/x.tlog.size", 0) == 0 &&
        !reply.body.empty() && reply.body.back() == '\n' &&
        ParseTlogDecimal(std::string_view(reply.body).substr(0, reply.body.size() - 1), &theirs) &&
        theirs != known_[i]) {
      known_[i] = theirs;
      continue;
    }
    break;
  }
  if (reply.status != 200) {
    return Status::Error(errc::kNoteUnverified, "HTTP " + S(reply.status) + ": " + Excerpt(reply.body));
  }
  // The answer is signature lines: appended to the note it parses as one.
  SignedNote answered;
  Status s = ParseNote(note + reply.body, &answered);
  std::vector<std::string> names;
  if (s.ok()) s = VerifyCosignatures(answered, {w.key}, 1, &names);
  if (!s.ok()) return Status::Error(s.code(), "its answer: " + s.message());
  for (const NoteSignature& sig : answered.sigs) {
    if (SameKey(sig, w.key)) lines->push_back(sig);
  }
  known_[i] = size;
  return Status::Ok();
}

}  // namespace tollgate
