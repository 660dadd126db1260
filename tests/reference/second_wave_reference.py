"""Float64 second-wave statistics of ../shared/docs/METRICS.md ("Second wave: spectra,
isotropy, sharpness, sinks, token samples"), for metrics_reference.py.

Written from those definitions only, each by its most direct route: the full singular
values of the N x d matrix of valid vectors, IsoScore from the eigenvalues of numpy.cov,
medians by numpy.median over exactly the entries a definition names, and scipy.stats
for skewness, rank and linear correlation and the Beta quantile.
"""
import numpy
import scipy.stats
import torch


def uniformity(vectors):
    """Mean pairwise cosine of n vectors: (||sum of unit vectors||^2 - n) / (n(n - 1))."""
    n = vectors.shape[0]
    total = (vectors / vectors.norm(dim=-1, keepdim=True)).sum(0)
    return ((total.dot(total) - n) / (n * (n - 1))).item()


def spectrum_stats(vectors):
    """Singular-value statistics of the uncentered N x d matrix (Yan et al. 2022)."""
    sigma = torch.linalg.svdvals(vectors).numpy()  # descending, min(N, d) of them
    energy = sigma ** 2

    def explained(k):
        return float(energy[:min(k, len(energy))].sum() / energy.sum())

    return {"spectrum": (sigma / sigma[0]).tolist(),
            "sv_skewness": float(scipy.stats.skew(sigma)),
            "sv_median": float(numpy.median(sigma / sigma[0])),
            "ev_1": explained(1), "ev_10": explained(10)}


def isoscore(vectors):
    """IsoScore (Rudman et al. 2022) from the eigenvalues of the centered covariance."""
    x = vectors.numpy()
    d = x.shape[1]
    eigenvalues = numpy.linalg.eigvalsh(numpy.cov(x, rowvar=False))
    normalized = numpy.sqrt(d) * eigenvalues / numpy.linalg.norm(eigenvalues)
    delta = numpy.linalg.norm(normalized - 1.0) / numpy.sqrt(2.0 * (d - numpy.sqrt(d)))
    return float(((d - delta ** 2 * (d - numpy.sqrt(d))) ** 2 - d) / (d * (d - 1)))


def token_uniformity(hidden, lengths):
    """TokenUni: mean over samples with at least two valid tokens of their uniformity."""
    per_sample = [uniformity(hidden[row, :n]) for row, n in enumerate(lengths) if n >= 2]
    return sum(per_sample) / len(per_sample)


def first_token_uniformity(hidden, lengths):
    """Mean pairwise cosine of every sample's position-0 vector."""
    return uniformity(torch.stack([hidden[row, 0] for row, n in enumerate(lengths) if n >= 1]))


def hidden_state_stats(hidden, valid, lengths):
    """Every second-wave statistic of one hidden state [B, T, d]."""
    vectors = hidden[valid]  # [N, d], sample order then position order
    magnitudes = vectors.abs().numpy()
    stats = spectrum_stats(vectors)
    stats.update({"isoscore": isoscore(vectors),
                  "token_uniformity": token_uniformity(hidden, lengths),
                  "first_token_uniformity": first_token_uniformity(hidden, lengths),
                  "max_abs": float(magnitudes.max()),
                  "median_abs": float(numpy.median(magnitudes, axis=1).mean())})
    return stats


def visible_rows(probs_head, lengths, causal):
    """p_i over the keys query i may see, for every valid query: probs_head is [B, T, T]."""
    for row, n in enumerate(lengths):
        for i in range(n):
            yield probs_head[row, i, :(i + 1 if causal else n)]


def attention_stats(probs_head, lengths, causal):
    """Means over valid queries of max, min, median and first-position probability."""
    rows = list(visible_rows(probs_head.numpy(), lengths, causal))
    return {"attn_max_prob": float(numpy.mean([p.max() for p in rows])),
            "attn_min_prob": float(numpy.mean([p.min() for p in rows])),
            "attn_median_prob": float(numpy.mean([numpy.median(p) for p in rows])),
            "attn_first_token_mass": float(numpy.mean([p[0] for p in rows]))}


def sample_count(token_samples, num_tokens):
    """M = min(token_samples, N); 0 turns the token samples off."""
    return min(max(token_samples, 0), num_tokens)


def token_sample(vectors, m):
    """vectors[floor(j N / M)] for j = 0 … M-1, vectors being the N valid ones in order."""
    n = vectors.shape[0]
    return [vectors[j * n // m].tolist() for j in range(m)]


def concat_mean_cosine(q, k, valid):
    """cos of the per-head Q and K means concatenated over heads; q, k are [B, H, T, d_h]."""
    q_mean = q.permute(0, 2, 1, 3)[valid].mean(0).reshape(-1)
    k_mean = k.permute(0, 2, 1, 3)[valid].mean(0).reshape(-1)
    return (q_mean.dot(k_mean) / (q_mean.norm() * k_mean.norm())).item()


def partition_isotropy(embedding):
    """I(W) = min_c Z(c) / max_c Z(c), c = ±u_k for the unit eigenvectors u_k of W^T W,
    Z(c) = sum_i exp(c . w_i), in log space (Mu & Viswanath 2018)."""
    _, eigenvectors = torch.linalg.eigh(embedding.T @ embedding)  # columns u_k
    directions = torch.cat((eigenvectors, -eigenvectors), dim=1)
    log_z = torch.logsumexp(embedding @ directions, dim=0)
    return torch.exp(log_z.min() - log_z.max()).item()


def correlation(mean_norms, anisotropies):
    """Spearman's rho and Pearson's r across hidden states, with two-sided p-values."""
    rho, rho_p = scipy.stats.spearmanr(mean_norms, anisotropies)
    r, r_p = scipy.stats.pearsonr(mean_norms, anisotropies)
    return {"spearman_rho": float(rho), "spearman_p": float(rho_p),
            "pearson_r": float(r), "pearson_p": float(r_p)}


def isotropic_p95(d):
    """95th percentile of the cosine of two independent isotropic Gaussian vectors in R^d."""
    return float(2.0 * scipy.stats.beta.ppf(0.95, (d - 1) / 2, (d - 1) / 2) - 1.0)
