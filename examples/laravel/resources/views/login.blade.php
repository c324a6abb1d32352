@extends('layout')

@section('title', 'Log in')

@section('content')
    <h1>Log in</h1>
    <form method="post" action="{{ route('login') }}">
        @csrf
        <label>Email <input name="email" type="email" value="{{ old('email') }}"></label>
        @error('email')<span class="error">{{ $message }}</span>@enderror
        <label>Password <input name="password" type="password"></label>
        @error('password')<span class="error">{{ $message }}</span>@enderror
        <button>Log in</button>
    </form>
@endsection
