#include "audit/checkpointer.h"

#include "core/log.h"

namespace tollgate {

Status CheckpointSigner(std::string_view seed, const std::string& origin, NoteSigner* out) {
  if (!origin.empty()) return NoteSigner::FromSeed(origin, seed, out);
  NoteSigner probe;
  Status s = NoteSigner::FromSeed("tollgate", seed, &probe);
  if (!s.ok()) return s;
  const std::string id = ToHex(Sha256(probe.public_key())).substr(0, 16);
  return NoteSigner::FromSeed("tollgate/" + id, seed, out);
}

Event CheckpointSignedEvent(const Checkpoint& cp, const std::string& note, int64_t time_us) {
  Event e;
  e.type = ev::kCheckpointSigned;
  e.org_id = kAllOrgs;  // about the whole log, like policy.updated of the file
  e.id = MakeEventId(e.type, "", cp.origin + ":" + std::to_string(cp.size));
  e.time_us = time_us;
  e.data = {{"origin", cp.origin},
            {"size", cp.size},
            {"root", Base64StdEncode(std::string_view(reinterpret_cast<const char*>(cp.root.data()), 32))},
            {"note", note}};
  return e;
}

Checkpointer::Checkpointer(MerkleStore& tree, NoteSigner signer, CheckpointOptions options, EventSink* sink)
    : tree_(tree), signer_(std::move(signer)), options_(options), sink_(sink) {}

Status Checkpointer::Start(MerkleStore& tree, uint64_t head_seq, NoteSigner signer, CheckpointOptions options,
                           EventSink* sink, std::unique_ptr<Checkpointer>* out) {
  if (options.log_them && sink == nullptr)
    return Status::Error(errc::kInvalidQuery, "no sink to log checkpoints");
  Status s = tree.CatchUp(head_seq);
  if (!s.ok()) return s;
  std::unique_ptr<Witnesses> witnesses;
  if (!options.witnesses.witnesses.empty()) {
    s = Witnesses::Start(
        tree, [&tree](uint64_t size, const std::string& note) { return tree.PutCheckpoint(size, note); },
        std::move(options.witnesses), &witnesses);
    if (!s.ok()) return s;
  }
  options.witnesses = {};
  std::unique_ptr<Checkpointer> c(new Checkpointer(tree, std::move(signer), options, sink));
  c->heard_ = c->news_ = head_seq;
  c->witnesses_ = std::move(witnesses);
  std::string latest;
  Checkpoint cp;
  SignedNote n;
  if (tree.LatestCheckpoint(&latest).ok() && ParseNote(latest, &n).ok() &&
      ParseCheckpointText(n.text, &cp).ok()) {
    c->signed_ = cp.size;
    // Cosigned before a restart, or not yet: the witnesses say again.
    if (c->witnesses_) c->witnesses_->Offer(cp.size, latest);
  }
  c->thread_ = std::thread([p = c.get()] { p->Run(); });
  *out = std::move(c);
  return Status::Ok();
}

Checkpointer::~Checkpointer() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Checkpointer::OnAppended(const std::vector<Event>& events) {
  uint64_t top = 0, news = 0;
  for (const Event& e : events) {
    top = std::max(top, e.seq);
    if (e.type != ev::kCheckpointSigned) news = std::max(news, e.seq);
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (top <= heard_) return;
  // Woken only when a multiple of every_events is crossed: waking the
  // thread on every append costs the appenders a context switch each
  // (bench log, append_tree_vs_off). The time rule runs on its own timer.
  const uint64_t n = options_.every_events;
  const bool crossed = n > 0 && top / n > heard_ / n;
  heard_ = top;  // durable: OnAppended sees a group once it is
  news_ = std::max(news_, news);
  if (crossed) wake_.notify_all();
}

bool Checkpointer::Due(std::chrono::steady_clock::time_point last_signed) const {
  // Growth that is only our own checkpoint.signed events is not news: an
  // idle log is not signed again and again.
  if (heard_ <= signed_ || news_ <= signed_) return false;
  if (options_.every_events > 0 && heard_ / options_.every_events > signed_ / options_.every_events)
    return true;
  return options_.every.count() > 0 && std::chrono::steady_clock::now() - last_signed >= options_.every;
}

void Checkpointer::Run() {
  auto last_signed = std::chrono::steady_clock::now();
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    const auto wait = options_.every.count() > 0 ? options_.every : std::chrono::milliseconds(60'000);
    wake_.wait_for(lock, wait, [&] { return stop_ || Due(last_signed); });
    if (stop_ || !Due(last_signed)) continue;
    // At the multiple of every_events when that rule fires, so processes
    // folding the same log sign the same sizes; else at what was heard.
    uint64_t size = heard_;
    if (options_.every_events > 0 && heard_ / options_.every_events > signed_ / options_.every_events)
      size = heard_ / options_.every_events * options_.every_events;
    lock.unlock();
    std::string note;
    Status s = SignAt(size, &note);
    lock.lock();
    if (!s.ok()) {
      Failed(s);
      wake_.wait_for(lock, std::chrono::seconds(1), [&] { return stop_; });  // then retry
      continue;
    }
    last_signed = std::chrono::steady_clock::now();
  }
}

Status Checkpointer::SignNow(std::string* note) {
  uint64_t size;
  {
    std::lock_guard<std::mutex> lock(mu_);
    // Only our own checkpoint.signed since the last one: that one stands.
    size = news_ <= signed_ && signed_ > 0 ? signed_ : heard_;
  }
  return SignAt(size, note);
}

// Brings the tree to `size`, signs its checkpoint unless the latest covers
// that size already (then returns that one), stores and logs it.
Status Checkpointer::SignAt(uint64_t size, std::string* note) {
  std::lock_guard<std::mutex> one(sign_mu_);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (size <= signed_ && signed_ > 0) return tree_.LatestCheckpoint(note);
  }
  Status s = tree_.CatchUp(size);
  Checkpoint cp;
  cp.origin = signer_.name();
  cp.size = size;
  if (s.ok()) s = merkle::RootAt(tree_, size, &cp.root);
  if (!s.ok()) return s;
  *note = SignCheckpoint(cp, signer_);
  s = tree_.PutCheckpoint(size, *note);
  if (s.ok() && options_.log_them) s = AppendOne(*sink_, CheckpointSignedEvent(cp, *note, NowMicros()));
  if (!s.ok()) return s;
  if (witnesses_) witnesses_->Offer(size, *note);  // cosigned on its thread
  std::lock_guard<std::mutex> lock(mu_);
  signed_ = std::max(signed_, size);
  last_error_ = Status::Ok();
  return Status::Ok();
}

void Checkpointer::Failed(const Status& s) {
  if (last_error_.ok())
    log::Warn({"checkpoint", "", ""}) << "cannot sign a checkpoint: " << s.ToString() << "\n";
  last_error_ = s;
}

Status Checkpointer::last_error() const {
  std::lock_guard<std::mutex> lock(mu_);
  return last_error_;
}

}  // namespace tollgate
